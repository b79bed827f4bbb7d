#!/usr/bin/env bash
# Final build of this stop, one device call (packed into $OUT/final3.tgz):
#  1. showdown W=2, 8: variants a c d f ((f) = (c) without wake-ahead), 4 interleaved runs
#  2. bench_wake_ahead.py: W=1, 2, 8; gaps 3 ms and 20 ms, jittered; 3 rounds
#  3. the Python GPU tests on the same (CUDA) build
#  4. showdown W=16: a c d, 3 runs (with its own strategy table: the core hop)
set -uo pipefail
out=${OUT:-/tmp/out}; work=/tmp/final3; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/final3.tgz" -C "$work" . ; }
trap pack EXIT
export BUILD_DIR=/tmp/b-final3
date -u > "$work/start.txt"
SHOWDOWN_ARGS="--variants acdf" WORKERS="2 8" REPEATS=4 STEPS=300 timeout 300 bash bench/showdown/device_showdown.sh "$work/sd" > "$work/sd-log.txt" 2>&1
echo "showdown rc=$? $(date -u +%T)"; grep -E "^\(|targets|\[" "$work/sd-log.txt" | grep -v "^  run" | grep -E "targets|\[|ovh|^\((a|c|d|f)\).*(sync|async) " | tail -60
rm -f "$work/sd/showdown.tgz"
for w in 1 2 8; do
  PYTHONPATH=$BUILD_DIR/python:bench/python timeout 60 python3 bench/python/bench_wake_ahead.py --workers $w --gap-ms 3 --jitter --messages 300 --rounds 3 > "$work/wake-ahead-w$w-3ms.txt" 2>&1
  PYTHONPATH=$BUILD_DIR/python:bench/python timeout 60 python3 bench/python/bench_wake_ahead.py --workers $w --gap-ms 20 --jitter --messages 100 --rounds 3 > "$work/wake-ahead-w$w-20ms.txt" 2>&1
  tail -1 "$work/wake-ahead-w$w-3ms.txt"; tail -1 "$work/wake-ahead-w$w-20ms.txt"
done
echo "wake-ahead done $(date -u +%T)"
RINGCAST_GPU_PY_MESSAGES=300 PYTHONPATH=$BUILD_DIR/python timeout 60 python3 -m pytest -q -rs -p no:cacheprovider \
  tests/python/test_gpu.py tests/python/test_vllm_plugin.py > "$work/python_gpu_tests.log" 2>&1; echo "gpu tests rc=$?"; tail -2 "$work/python_gpu_tests.log"
SHOWDOWN_ARGS="--variants acd" WORKERS="16" REPEATS=3 STEPS=300 timeout 150 bash bench/showdown/device_showdown.sh "$work/sd16" > "$work/sd16-log.txt" 2>&1
echo "w16 rc=$? $(date -u +%T)"; grep -E "targets|\[" "$work/sd16-log.txt" | tail -12
rm -f "$work/sd16/showdown.tgz"
