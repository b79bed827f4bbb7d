#!/usr/bin/env bash
# Session 14, call C: the core hop against the payload's cache lines. strategies --size 8, 32, 48, 64, 112
# (records of 32, 48, 64, 80, 128 B: one line up to 48 B of payload, two from 64), two rounds, alternated.
set -uo pipefail
out=${OUT:-/tmp/out}; work=/tmp/s14c; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/s14c.tgz" -C "$work" . ; }
trap pack EXIT
date -u > "$work/start.txt"; cp .old/build-rev.txt "$work/build.txt"
b=/tmp/b-s14c
cmake -S . -B $b -DRINGCAST_BUILD_PYTHON=OFF -DRINGCAST_BUILD_TESTS=OFF -DRINGCAST_BENCH_ZMQ=OFF > "$work/configure.log" 2>&1 || { tail -20 "$work/configure.log"; exit 1; }
cmake --build $b -j16 --target ringcast_bench > "$work/build.log" 2>&1 || { tail -30 "$work/build.log"; exit 1; }
echo "built $(date -u +%T)"
for round in 1 2; do
  for size in 8 32 48 64 112; do
    $b/bench/ringcast-bench strategies --readers 2 --size $size --json "$work/r$round-s$size.json" > "$work/r$round-s$size.txt" 2>&1
    echo "round $round size $size: $(grep -E '^(hybrid_adapt|floor_atomic) ' "$work/r$round-s$size.txt" | awk '{print $1, $2}' | tr '\n' ' ')"
  done
done
