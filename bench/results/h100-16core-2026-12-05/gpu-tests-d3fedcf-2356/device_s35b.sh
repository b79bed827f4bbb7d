#!/usr/bin/env bash
# Call B of 2026-12-05 (packed into $OUT/s35b.tgz): a CUDA build of this session's HEAD; the C++ GPU tests on the GPU,
# then the Python GPU, vLLM plug-in, one-call, gather, queue and argument tests.
set -uo pipefail
out=${OUT:-/tmp/out}; work=/tmp/s35b; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/s35b.tgz" -C "$work" . ; }
trap pack EXIT
b=/tmp/b-s35b
date -u > "$work/start.txt"; cp .dev35/build-rev.txt "$work/"; cp "$0" "$work/"; nvidia-smi -L > "$work/gpu.txt" 2>&1
cmake -S . -B "$b" -DCMAKE_BUILD_TYPE=Release -DRINGCAST_BUILD_TESTS=ON -DRINGCAST_BUILD_BENCH=OFF -DRINGCAST_BUILD_TOOLS=OFF \
  -DRINGCAST_BENCH_ZMQ=OFF -DRINGCAST_HIP=OFF -DCMAKE_CUDA_ARCHITECTURES=90 -DPython_EXECUTABLE="$(command -v python3)" \
  -Dpybind11_DIR="$(python3 -m pybind11 --cmakedir)" > "$work/configure.log" 2>&1; echo "configure rc=$?"; tail -2 "$work/configure.log"
cmake --build "$b" -j16 --target ringcast_python_core ringcast_python_gpu ringcast_gpu_cuda_tests ringcast_gpu_shim_tests ringcast_tests > "$work/build.log" 2>&1
echo "build rc=$? $(date -u +%T)"; tail -3 "$work/build.log"
for t in ringcast_gpu_shim_tests ringcast_gpu_cuda_tests; do
  x=$(find "$b" -name $t -type f | head -1); [ -n "$x" ] || { echo "$t not built"; continue; }
  timeout 120 "$x" > "$work/$t.log" 2>&1; echo "$t rc=$? $(date -u +%T)"; grep -E "PASSED|FAILED" "$work/$t.log" | tail -4
done
x=$(find "$b" -name ringcast_tests -type f | head -1); timeout 150 "$x" --gtest_filter='ScatterWrite.*:*Gather*:Segment.*' > "$work/core_tests.log" 2>&1; echo "core tests rc=$?"; grep -E "PASSED|FAILED" "$work/core_tests.log" | tail -4
RINGCAST_GPU_PY_MESSAGES=300 PYTHONPATH=$b/python timeout 260 python3 -m pytest -q -rs -p no:cacheprovider \
  tests/python/test_gpu.py tests/python/test_vllm_plugin.py tests/python/test_one_call.py tests/python/test_gather.py \
  tests/python/test_queue.py tests/python/test_arg_errors.py tests/python/test_dequeue_many_threads.py tests/python/test_aio.py > "$work/python_tests.log" 2>&1
echo "python tests rc=$? $(date -u +%T)"; tail -8 "$work/python_tests.log"
