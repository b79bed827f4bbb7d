#!/usr/bin/env bash
# The build at HEAD (build.txt: the working tree, clean): the showdown, W=8 and W=2, variants a c, 5
# interleaved runs of 300 steps, torch loaded, pinned, with device_showdown.sh's strategy table and
# neighbour probes first.
set -uo pipefail
tag=${TAG:-s48b}
out=${OUT:-/tmp/out}; work=/tmp/$tag; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/$tag.tgz" -C "$work" . ; }
trap pack EXIT
build=/tmp/b-s48
date -u > "$work/start.txt"; cp .dev48/build-rev.txt "$work/build.txt"; cp "$0" "$work/"; git status --short > "$work/tree-status.txt" 2>&1
lscpu | grep -E "^Model:|^Model name" | tee "$work/machine.txt"
cmake -S . -B "$build" -DRINGCAST_BUILD_TESTS=OFF -DRINGCAST_BENCH_ZMQ=OFF -DPython_EXECUTABLE="$(command -v python3)" \
  -Dpybind11_DIR="$(python3 -m pybind11 --cmakedir)" > "$work/configure.log" 2>&1 && cmake --build "$build" -j16 > "$work/build.log" 2>&1 || { tail -30 "$work/build.log"; exit 1; }
echo "built $(date -u +%T)"
SHOWDOWN_ARGS="--variants ac --import-torch" WORKERS="8 2" REPEATS=5 STEPS=300 BUILD_DIR=$build timeout 470 bash bench/showdown/device_showdown.sh "$work/sd" > "$work/sd-log.txt" 2>&1
echo "showdown rc=$? $(date -u +%T)"; pack
grep -E "x atomic|hybrid " "$work/sd/strategies.txt" | head -8
grep -E "^\((a|c)\)|^python floor|^== showdown|median" "$work/sd-log.txt" | head -60
echo "end $(date -u +%T)"
