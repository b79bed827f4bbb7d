#!/usr/bin/env bash
# Session 18, call B (packed into $OUT/s18b.tgz): the Python GPU tests on a CUDA build after enqueue's
# device pickling moved into the binding (test_gpu.py, test_vllm_plugin.py, with a real H200), then
# bench_gpu_loaded.py (torch loaded / stand-in / plain, 3 runs), pinned to one CPU.
set -uo pipefail
out=${OUT:-/tmp/out}; work=/tmp/s18b; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/s18b.tgz" -C "$work" . ; }
trap pack EXIT
py=python3; b=/tmp/b-s18b
date -u > "$work/start.txt"; cp .old/build-rev.txt "$work/build.txt"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$work/gpu.txt" 2>&1
cmake -S . -B "$b" -DCMAKE_BUILD_TYPE=Release -DRINGCAST_BUILD_TESTS=OFF -DRINGCAST_BENCH_ZMQ=OFF -DRINGCAST_HIP=OFF \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DPython_EXECUTABLE="$(command -v $py)" -Dpybind11_DIR="$($py -m pybind11 --cmakedir)" \
  > "$work/configure.log" 2>&1 || { tail -30 "$work/configure.log"; exit 1; }
cmake --build "$b" -j"$(nproc)" --target ringcast_python_core ringcast_python_gpu > "$work/build.log" 2>&1 || { tail -40 "$work/build.log"; exit 1; }
grep -E "ringcast GPU" "$work/configure.log"
echo "built $(date -u +%T)"
RINGCAST_GPU_PY_MESSAGES=300 PYTHONPATH=$b/python timeout 180 $py -m pytest -q -rs -p no:cacheprovider \
  tests/python/test_gpu.py tests/python/test_vllm_plugin.py tests/python/test_one_call.py > "$work/python_gpu_tests.log" 2>&1
echo "gpu tests rc=$? $(date -u +%T)"; tail -12 "$work/python_gpu_tests.log"
PYTHONPATH=$b/python timeout 200 taskset -c 5 $py bench/python/bench_gpu_loaded.py --runs 3 > "$work/gpu_loaded.txt" 2>&1
echo "gpu_loaded rc=$? $(date -u +%T)"; cat "$work/gpu_loaded.txt"
