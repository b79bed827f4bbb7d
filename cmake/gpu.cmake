# GPU interop (include/ringcast/gpu/, src/gpu/): optional, AUTO by default. Included from the top-level
# CMakeLists.txt in its own scope (include(), not add_subdirectory) because enable_language(CUDA) must
# run in the directory that holds every CUDA target's common parent.
#   RINGCAST_CUDA  AUTO: built when a CUDA toolkit with nvcc is found; ON: required; OFF: skipped.
#   RINGCAST_HIP   AUTO: built when Debian's HIP runtime (hip/hip_runtime_api.h, libamdhip64) is found.
# Configure prints one line per backend saying what it built or skipped, and why.
set(RINGCAST_CUDA AUTO CACHE STRING "CUDA interop: AUTO, ON or OFF")
set(RINGCAST_HIP AUTO CACHE STRING "HIP interop (compile and link; no AMD GPU needed): AUTO, ON or OFF")
set_property(CACHE RINGCAST_CUDA PROPERTY STRINGS AUTO ON OFF)
set_property(CACHE RINGCAST_HIP PROPERTY STRINGS AUTO ON OFF)

set(RINGCAST_GPU_CUDA OFF)
set(RINGCAST_GPU_HIP OFF)

if(RINGCAST_CUDA STREQUAL "OFF")
  message(STATUS "ringcast GPU: CUDA skipped (RINGCAST_CUDA=OFF)")
else()
  if(NOT DEFINED CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  find_package(CUDAToolkit QUIET)
  if(CMAKE_CUDA_COMPILER AND CUDAToolkit_FOUND)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90)  # Hopper (H100/H200); PTX in the fatbinary JITs on newer GPUs
    endif()
    enable_language(CUDA)
    set(RINGCAST_GPU_CUDA ON)
    message(STATUS "ringcast GPU: CUDA ${CUDAToolkit_VERSION} built (nvcc ${CMAKE_CUDA_COMPILER}, "
                   "architectures ${CMAKE_CUDA_ARCHITECTURES}); GPU tests skip with the reason where no GPU is usable")
  elseif(RINGCAST_CUDA STREQUAL "ON")
    message(FATAL_ERROR "RINGCAST_CUDA=ON but no CUDA toolkit with nvcc was found (set CMAKE_CUDA_COMPILER)")
  else()
    message(STATUS "ringcast GPU: CUDA skipped (no CUDA toolkit with nvcc found; RINGCAST_CUDA=AUTO)")
  endif()
endif()

if(RINGCAST_HIP STREQUAL "OFF")
  message(STATUS "ringcast GPU: HIP skipped (RINGCAST_HIP=OFF)")
else()
  find_path(RINGCAST_HIP_INCLUDE hip/hip_runtime_api.h PATHS /usr/include /opt/rocm/include)
  find_library(RINGCAST_HIP_LIBRARY amdhip64 PATHS /opt/rocm/lib)
  if(RINGCAST_HIP_INCLUDE AND RINGCAST_HIP_LIBRARY)
    set(RINGCAST_GPU_HIP ON)
    message(STATUS "ringcast GPU: HIP built, compile and link only (${RINGCAST_HIP_LIBRARY}); "
                   "its tests assert the clean 'no device' error where no AMD GPU exists")
  elseif(RINGCAST_HIP STREQUAL "ON")
    message(FATAL_ERROR "RINGCAST_HIP=ON but hip/hip_runtime_api.h or libamdhip64 was not found "
                        "(apt install libamdhip64-dev)")
  else()
    message(STATUS "ringcast GPU: HIP skipped (no hip/hip_runtime_api.h + libamdhip64; apt install libamdhip64-dev)")
  endif()
endif()

if(RINGCAST_GPU_CUDA OR RINGCAST_GPU_HIP)
  add_subdirectory(${CMAKE_CURRENT_LIST_DIR}/../src/gpu ${CMAKE_BINARY_DIR}/src/gpu)
endif()
if(RINGCAST_GPU_CUDA AND RINGCAST_BUILD_BENCH AND NOT RINGCAST_SANITIZE)
  find_package(Threads REQUIRED)
  add_subdirectory(${CMAKE_CURRENT_LIST_DIR}/../bench/gpu ${CMAKE_BINARY_DIR}/bench/gpu)
endif()
