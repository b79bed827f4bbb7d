#!/usr/bin/env bash
# Call C of 2026-12-06 (session 39), a fresh machine, the commit in build-rev.txt (the library as at ef1db6a:
# later commits changed documents and stored results only): the core hop three times (does the ratio of
# the 10:25 call hold on another machine?), then the showdown at W=8 alone with --trace (the pickling
# timed inside each part of the sync step and the async tail), variants a c, 3 interleaved runs of 300
# steps, pinned (without torch: --trace cannot time the enqueue's pickling with torch loaded).
set -uo pipefail
out=${OUT:-/tmp/out}; work=/tmp/s39c; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/s39c.tgz" -C "$work" . ; }
trap pack EXIT
build=/tmp/b-s39c
date -u > "$work/start.txt"; cp .dev39/build-rev.txt "$work/build.txt"; cp "$0" "$work/"
cmake -S . -B $build -DRINGCAST_BUILD_TESTS=OFF -DRINGCAST_BENCH_ZMQ=OFF -DPython_EXECUTABLE="$(command -v python3)" \
  -Dpybind11_DIR="$(python3 -m pybind11 --cmakedir)" > "$work/configure.log" 2>&1 && cmake --build $build -j16 --target ringcast_bench > "$work/build-hop.log" 2>&1 || { tail -30 "$work/build-hop.log"; exit 1; }
lscpu | grep -E "^Model:|Model name" ; date -u +%T
for i in 1 2 3; do timeout 30 $build/bench/ringcast-bench hop --readers 1 > "$work/hop-$i.txt" 2>&1; echo "hop $i rc=$?"; tail -1 "$work/hop-$i.txt"; done
SHOWDOWN_ARGS="--variants ac --trace" WORKERS="8" REPEATS=3 STEPS=300 BUILD_DIR=$build timeout 400 bash bench/showdown/device_showdown.sh "$work/sd" > "$work/sd-log.txt" 2>&1
echo "showdown rc=$? $(date -u +%T)"
grep -E "^\s+\[|idle|^== showdown" "$work/sd-log.txt" | tail -20
echo "end $(date -u +%T)"
