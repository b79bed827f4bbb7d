#!/usr/bin/env bash
# Call E of 2026-12-06 (~09:10): the step's four calls without pybind11's dispatcher (fastcall.hpp), A/B on
# the 16-core machine. One build of the working tree (HEAD in build-rev.txt plus the fast entries); two
# copies of its Python package: B as built (the Python layer calls the FastEntry callables), A with
# _queue.py, _gather.py and vllm.py of HEAD (the layer calls the pybind11 methods; the same _core).
# 1. bench_step_split.py --workers 1 and 8, 3000 steps, 1 run per invocation, arms alternated (A B B A).
# 2. showdown W=8, variants a c, 1 run of 300 steps per invocation, torch loaded, pinned, arms
#    alternated over 5 rounds (A B / B A / ...).
set -uo pipefail
out=${OUT:-/tmp/out}; work=/tmp/s38e; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/s38e.tgz" -C "$work" . ; }
trap pack EXIT
b=/tmp/b-s38e
date -u > "$work/start.txt"; cp .dev38/build-rev.txt "$work/build.txt"; cp "$0" "$work/"
cmake -S . -B "$b" -DRINGCAST_BUILD_TESTS=OFF -DRINGCAST_BENCH_ZMQ=OFF -DPython_EXECUTABLE="$(command -v python3)" \
  -Dpybind11_DIR="$(python3 -m pybind11 --cmakedir)" > "$work/configure.log" 2>&1
cmake --build "$b" -j16 --target ringcast_python_core > "$work/build.log" 2>&1; echo "build rc=$? $(date -u +%T)"
rm -rf /tmp/pyA /tmp/pyB; mkdir -p /tmp/pyA /tmp/pyB
cp -r "$b/python/ringcast" /tmp/pyB/; cp -r "$b/python/ringcast" /tmp/pyA/; cp .dev38/pyA-src/*.py /tmp/pyA/ringcast/
grep -c "fast_" /tmp/pyA/ringcast/_gather.py /tmp/pyB/ringcast/_gather.py
n=0
for arm in A B B A; do
  for w in 1 8; do
    n=$((n+1)); f="$work/split-$n-$arm-w$w.txt"
    PYTHONPATH=/tmp/py$arm:bench/python timeout 60 python3 bench/python/bench_step_split.py --workers $w --runs 1 --steps 3000 > "$f" 2>&1
    echo "split $n $arm W=$w rc=$? $(grep -E 'reply: Python|overhead' "$f" | awk '{printf "%s ", $NF}')"
  done
done
for round in 1 2 3 4 5; do
  order="A B"; [ $((round % 2)) = 0 ] && order="B A"
  for arm in $order; do
    f="$work/sd-r$round-$arm-w8.txt"
    PYTHONPATH=/tmp/py$arm timeout 60 python3 bench/showdown/showdown.py --workers 8 --steps 300 --repeats 1 --variants ac \
      --import-torch --idle-seconds 0.3 --out "$work/o-r$round-$arm" > "$f" 2>&1
    echo "sd $round $arm rc=$? $(date -u +%T) $(grep -E '^\((a|c)\) ' "$f" | head -8 | awk '{printf "%s%s ", substr($1,2,1), $(NF-6)}')"
  done
done
rm -rf "$work"/o-r*
echo "end $(date -u +%T)"
