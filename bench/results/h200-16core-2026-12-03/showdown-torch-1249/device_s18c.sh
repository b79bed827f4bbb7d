#!/usr/bin/env bash
# Session 18, call C (packed into $OUT/s18c.tgz): the showdown with torch loaded in every process
# (--import-torch: the path of an inference engine, enqueue's device pickling in the binding), W=2 and
# W=8, variants a c, 5 interleaved runs of 300 steps, pinned; the README's table. Then bench_gpu_loaded.py.
set -uo pipefail
out=${OUT:-/tmp/out}; work=/tmp/s18c; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/s18c.tgz" -C "$work" . ; }
trap pack EXIT
build=/tmp/b-s18c
date -u > "$work/start.txt"; cp .old/build-rev.txt "$work/build.txt"
SHOWDOWN_ARGS="--variants ac --import-torch" WORKERS="2 8" REPEATS=5 STEPS=300 BUILD_DIR=$build timeout 540 bash bench/showdown/device_showdown.sh "$work/sd" > "$work/sd-log.txt" 2>&1
echo "showdown rc=$? $(date -u +%T)"
grep -E -A7 "where a sync step" "$work/sd-log.txt" | cut -c1-190
grep -E "^\s+\[|idle|torch loaded" "$work/sd-log.txt" | tail -30
rm -f "$work/sd/showdown.tgz"
PYTHONPATH=$build/python timeout 120 taskset -c 5 python3 bench/python/bench_gpu_loaded.py --runs 3 > "$work/gpu_loaded.txt" 2>&1
echo "gpu_loaded rc=$? $(date -u +%T)"; tail -11 "$work/gpu_loaded.txt"
b=/tmp/b-s18c-gpu
cmake -S . -B "$b" -DCMAKE_BUILD_TYPE=Release -DRINGCAST_BUILD_TESTS=OFF -DRINGCAST_BENCH_ZMQ=OFF -DRINGCAST_HIP=OFF \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DPython_EXECUTABLE="$(command -v python3)" -Dpybind11_DIR="$(python3 -m pybind11 --cmakedir)" \
  > "$work/gpu-configure.log" 2>&1 && \
cmake --build "$b" -j16 --target ringcast_python_core ringcast_python_gpu > "$work/gpu-build.log" 2>&1 && \
RINGCAST_GPU_PY_MESSAGES=300 PYTHONPATH=$b/python timeout 100 python3 -m pytest -q -rs -p no:cacheprovider \
  tests/python/test_gpu.py tests/python/test_vllm_plugin.py tests/python/test_one_call.py > "$work/python_gpu_tests.log" 2>&1
echo "gpu tests rc=$? $(date -u +%T)"; tail -4 "$work/python_gpu_tests.log"
