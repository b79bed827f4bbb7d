#!/usr/bin/env bash
# The final build (build.txt: the working tree, clean): the core hop with its floor rows (3 invocations)
# first; then the showdown, W=8 and W=2, variants a c, 5 interleaved runs of 300 steps, torch loaded,
# pinned, the strategy table first; then the GIL stretch (5 x 1 s) and the idle control (a Python+torch
# process that only sleeps, with and without a queue open: 20 readings each).
set -uo pipefail
tag=${TAG:-s45a}
out=${OUT:-/tmp/out}; work=/tmp/$tag; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/$tag.tgz" -C "$work" . ; }
trap pack EXIT
build=/tmp/b-s45
date -u > "$work/start.txt"; cp .dev45/build-rev.txt "$work/build.txt"; cp "$0" .dev45/idle_exec.py "$work/"; git status --short > "$work/tree-status.txt" 2>&1
lscpu | grep -E "^Model:|^Model name" | tee "$work/machine.txt"
cmake -S . -B "$build" -DRINGCAST_BUILD_TESTS=OFF -DRINGCAST_BENCH_ZMQ=OFF -DPython_EXECUTABLE="$(command -v python3)" \
  -Dpybind11_DIR="$(python3 -m pybind11 --cmakedir)" > "$work/configure.log" 2>&1 && cmake --build "$build" -j16 > "$work/build.log" 2>&1 || { tail -30 "$work/build.log"; exit 1; }
echo "built $(date -u +%T)"
for i in 1 2 3; do timeout 50 $build/bench/ringcast-bench hop --readers 1 --json "$work/hop-$i.json" > "$work/hop-$i.txt" 2>&1
  echo "hop $i rc=$? $(date -u +%T) $(grep -E '^hybrid RTT' "$work/hop-$i.txt" | sed -E 's/.*rounds: ([0-9.]+).*/\1/' | tr '\n' ' ')"; pack; done
SHOWDOWN_ARGS="--variants ac --import-torch" WORKERS="8 2" REPEATS=5 STEPS=300 BUILD_DIR=$build timeout 330 bash bench/showdown/device_showdown.sh "$work/sd" > "$work/sd-log.txt" 2>&1
echo "showdown rc=$? $(date -u +%T)"; pack
grep -E "x atomic|hybrid " "$work/sd/strategies.txt" | head -8
grep -E "^\s+\[|idle|^== showdown" "$work/sd-log.txt" | tail -40
PYTHONPATH=$build/python timeout 40 python3 bench/python/bench_gil.py --runs 5 > "$work/gil.txt" 2>&1; echo "gil rc=$?"; tail -8 "$work/gil.txt"
for m in plain ringcast; do PYTHONPATH=$build/python timeout 40 python3 .dev45/idle_exec.py $m 20 > "$work/idle-$m.txt" 2>&1; echo "idle $m rc=$?"; tail -1 "$work/idle-$m.txt"; done
echo "end $(date -u +%T)"
