#!/usr/bin/env bash
# ringcast-line-home as committed (the walk through the same pairs; the rounds' rank correlation), on the
# CPU pairs of the 12:13 call and unpinned; then the core hop with its new row floor_ring_asym
# (floor_ring_tail without the fences on its hot path): 3 invocations not pinned, 1 pinned (`--pin`:
# CPUs 0,1), `ringcast-bench hop --readers 1`, 7 alternated rounds each.
set -uo pipefail
tag=${TAG:-s49c}
out=${OUT:-/tmp/out}; work=/tmp/$tag; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/$tag.tgz" -C "$work" . ; }
trap pack EXIT
build=$PWD/build-s49h
date -u > "$work/start.txt"; git rev-parse --short HEAD > "$work/build.txt" 2>/dev/null || cp .dev49/build-rev.txt "$work/build.txt"
cp "$0" "$work/"; git status --short > "$work/tree-status.txt" 2>&1
lscpu | grep -E "^Model:|^Model name|^NUMA node\(|^Thread" | tee "$work/machine.txt"
cmake -S . -B "$build" -DRINGCAST_BUILD_TESTS=OFF -DRINGCAST_BUILD_PYTHON=OFF -DRINGCAST_BUILD_TOOLS=OFF -DRINGCAST_BENCH_ZMQ=OFF \
  -DRINGCAST_CUDA=OFF -DRINGCAST_HIP=OFF > "$work/configure.log" 2>&1 && cmake --build "$build" -j16 --target ringcast_bench ringcast_line_home > "$work/build.log" 2>&1 || { tail -30 "$work/configure.log" "$work/build.log"; exit 1; }
echo "built $(date -u +%T)"
lh=$build/bench/profile/ringcast-line-home
run_lh() { local name=$1; shift; timeout 60 $lh --pairs 32 --trips 20000 --rounds 5 "$@" > "$work/lines-$name.txt" 2>&1; echo "lines $name rc=$? $(date -u +%T)"; tail -11 "$work/lines-$name.txt"; pack; }
run_lh unpinned
for c in 2,9 0,1 2,3 5,14; do run_lh "cpus${c/,/-}" --cpus $c; done
for run in 1 2 3 pinned; do
  pin=; [ $run = pinned ] && pin=--pin
  timeout 90 $build/bench/ringcast-bench hop --readers 1 $pin --json "$work/hop-$run.json" > "$work/hop-$run.txt" 2>&1
  echo "hop $run rc=$? $(date -u +%T)"; grep -A9 "^p50 us" "$work/hop-$run.txt" | grep -v "^order"; grep "^hybrid RTT" "$work/hop-$run.txt" | cut -c1-80; pack
done
echo "end $(date -u +%T)"
