#!/usr/bin/env bash
# The core hop's floor, line by line (bench/profile/line_home.cpp): does a line's address decide the
# atomic floor's round trip? Pinned on four CPU pairs and unpinned, 5 rounds each; then the hop itself
# (unpinned, and pinned on CPUs 0,1 as --pin does) on the same machine.
set -uo pipefail
tag=${TAG:-s49b}
out=${OUT:-/tmp/out}; work=/tmp/$tag; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/$tag.tgz" -C "$work" . ; }
trap pack EXIT
build=$PWD/build-s49h
date -u > "$work/start.txt"; cp .dev49/build-rev.txt "$work/build.txt"; cp "$0" "$work/"; git status --short > "$work/tree-status.txt" 2>&1
lscpu | grep -E "^Model:|^Model name|^NUMA|^L3|^Thread|^Socket" | tee "$work/machine.txt"
cmake -S . -B "$build" -DRINGCAST_BUILD_TESTS=OFF -DRINGCAST_BUILD_PYTHON=OFF -DRINGCAST_BUILD_TOOLS=OFF -DRINGCAST_BENCH_ZMQ=OFF \
  -DRINGCAST_CUDA=OFF -DRINGCAST_HIP=OFF > "$work/configure.log" 2>&1 && cmake --build "$build" -j16 --target ringcast_bench ringcast_line_home > "$work/build.log" 2>&1 || { tail -30 "$work/configure.log" "$work/build.log"; exit 1; }
echo "built $(date -u +%T)"
lh=$build/bench/profile/ringcast-line-home
run_lh() { local name=$1; shift; timeout 60 $lh --pairs 32 --trips 20000 --rounds 5 "$@" > "$work/lines-$name.txt" 2>&1; echo "lines $name rc=$? $(date -u +%T)"; tail -9 "$work/lines-$name.txt"; pack; }
run_lh unpinned
for c in 0,1 2,3 2,9 5,14; do run_lh "cpus${c/,/-}" --cpus $c; done
timeout 80 $build/bench/ringcast-bench hop --readers 1 --json "$work/hop-unpinned.json" > "$work/hop-unpinned.txt" 2>&1
echo "hop unpinned rc=$? $(date -u +%T)"; grep -A8 "^p50 us" "$work/hop-unpinned.txt"; grep "^hybrid RTT" "$work/hop-unpinned.txt"; pack
timeout 80 $build/bench/ringcast-bench hop --readers 1 --pin --json "$work/hop-pinned.json" > "$work/hop-pinned.txt" 2>&1
echo "hop pinned rc=$? $(date -u +%T)"; grep -A8 "^p50 us" "$work/hop-pinned.txt"; grep "^hybrid RTT" "$work/hop-pinned.txt"; pack
run_lh unpinned-again
echo "end $(date -u +%T)"
