#!/usr/bin/env bash
# Session 18, call E (packed into $OUT/s18e.tgz): the Python GPU tests on a CUDA build after the review
# fixes of enqueue's device path (test_gpu.py, test_vllm_plugin.py, test_one_call.py).
set -uo pipefail
out=${OUT:-/tmp/out}; work=/tmp/s18e; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/s18e.tgz" -C "$work" . ; }
trap pack EXIT
b=/tmp/b-s18e
date -u > "$work/start.txt"; cp .old/build-rev.txt "$work/build.txt"
cmake -S . -B "$b" -DCMAKE_BUILD_TYPE=Release -DRINGCAST_BUILD_TESTS=OFF -DRINGCAST_BENCH_ZMQ=OFF -DRINGCAST_HIP=OFF \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DPython_EXECUTABLE="$(command -v python3)" -Dpybind11_DIR="$(python3 -m pybind11 --cmakedir)" \
  > "$work/configure.log" 2>&1 && \
cmake --build "$b" -j16 --target ringcast_python_core ringcast_python_gpu > "$work/build.log" 2>&1 && \
RINGCAST_GPU_PY_MESSAGES=300 PYTHONPATH=$b/python timeout 100 python3 -m pytest -q -rs -p no:cacheprovider \
  tests/python/test_gpu.py tests/python/test_vllm_plugin.py tests/python/test_one_call.py > "$work/python_gpu_tests.log" 2>&1
echo "gpu tests rc=$? $(date -u +%T)"; tail -4 "$work/python_gpu_tests.log"; grep -c PASSED "$work/python_gpu_tests.log"
