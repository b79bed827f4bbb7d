# ringcast._gpucore (src/gpu.cpp): a module of its own, built only when the GPU interop is, so that
# `import ringcast` never loads a GPU runtime. Included from bindings/python/CMakeLists.txt.
if(TARGET ringcast_gpu)
  pybind11_add_module(ringcast_python_gpu MODULE ${CMAKE_CURRENT_LIST_DIR}/gpu.cpp)
  target_link_libraries(ringcast_python_gpu PRIVATE ringcast::gpu)
  target_compile_options(ringcast_python_gpu PRIVATE -Wall -Wextra -Wshadow)
  set_target_properties(ringcast_python_gpu PROPERTIES OUTPUT_NAME _gpucore LIBRARY_OUTPUT_DIRECTORY ${RINGCAST_PY_DIR})
endif()
