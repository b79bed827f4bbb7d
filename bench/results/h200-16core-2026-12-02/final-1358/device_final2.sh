#!/usr/bin/env bash
# Final build of this stop (HEAD a5f3bef), one device call:
#  1. the executor showdown W=2,8,16, variants a c d (the README table), with its C++ floors and strategies
#  2. the Python GPU tests on the same (CUDA) build, 300 objects
#  3. bench_gpu_loaded.py (torch 2.11 there)
# Everything is packed into $OUT/final.tgz (the device returns at most 8 files).
set -uo pipefail
out=${OUT:-/tmp/out}; work=/tmp/final; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/final.tgz" -C "$work" . ; }
trap pack EXIT
export BUILD_DIR=/tmp/b-final
SHOWDOWN_ARGS="--variants acd" WORKERS="2 8 16" timeout 470 bash bench/showdown/device_showdown.sh "$work/sd" > "$work/sd-log.txt" 2>&1
echo "showdown rc=$?"; grep -E "overhead p50|target|idle" "$work/sd-log.txt" | grep -v "^  run" | tail -60
rm -f "$work/sd/showdown.tgz"
RINGCAST_GPU_PY_MESSAGES=300 PYTHONPATH=$BUILD_DIR/python timeout 60 python3 -m pytest -q -rs -p no:cacheprovider \
  tests/python/test_gpu.py > "$work/python_gpu_tests.log" 2>&1; echo "gpu tests rc=$?"; tail -3 "$work/python_gpu_tests.log"
PYTHONPATH=$BUILD_DIR/python timeout 60 python3 bench/python/bench_gpu_loaded.py --runs 3 > "$work/gpu_loaded.txt" 2>&1
echo "gpu_loaded rc=$?"; cat "$work/gpu_loaded.txt"
