#!/usr/bin/env bash
# Session 15, call B (packed into $OUT/s15b.tgz): the core hop at the matrix's reader count (R=1), alternated
# rounds, pinned and unpinned, 3 calls each; the hop split by direction (.old/hopx, 1 reader pinned: the
# request through a ring or a floor line, the reply likewise); the code path of one round trip in one
# thread, ringcast's four calls against the floor's stores and loads.
set -uo pipefail
out=${OUT:-/tmp/out}; work=/tmp/s15b; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/s15b.tgz" -C "$work" . ; }
trap pack EXIT
date -u > "$work/start.txt"; cp .old/build-rev.txt "$work/build.txt"
b=/tmp/b-s15b
cmake -S . -B $b -DRINGCAST_BUILD_PYTHON=OFF -DRINGCAST_BUILD_TESTS=OFF -DRINGCAST_BENCH_ZMQ=OFF > "$work/configure.log" 2>&1 || { tail -20 "$work/configure.log"; exit 1; }
cmake --build $b -j16 --target ringcast_bench > "$work/build.log" 2>&1 || { tail -30 "$work/build.log"; exit 1; }
echo "built $(date -u +%T)"
for call in 1 2 3; do
  for mode in pin nopin; do
    flag=""; [ $mode = pin ] && flag=--pin
    $b/bench/ringcast-bench hop --readers 1 --rounds 7 $flag --json "$work/hop-r1-$call-$mode.json" > "$work/hop-r1-$call-$mode.txt" 2>&1
    echo "hop R=1 $call $mode: $(grep -E '^floor_atomic|^hybrid .*median' "$work/hop-r1-$call-$mode.txt" | sed 's/  */ /g' | tr '\n' '|')"
  done
done
mkdir -p "$work/hopx"
g++ -std=c++20 -O2 -Iinclude .old/hopx/hopx.cpp $b/libringcast.a -o /tmp/hopx_inc -lpthread 2>> "$work/hopx/build.log"
g++ -std=c++20 -O2 -Iinclude .old/hopx/st.cpp $b/libringcast.a -o /tmp/st_inc -lpthread 2>> "$work/hopx/build.log"
g++ -std=c++20 -O2 .old/hopx/stfloor.cpp -o /tmp/stfloor 2>> "$work/hopx/build.log"
for k in 1 2 3 4 5; do for m in floor rcreq rcrep rc; do /tmp/hopx_inc $m; done; done > "$work/hopx/split.txt" 2>&1
for k in 1 2 3; do /tmp/stfloor; /tmp/st_inc; done > "$work/hopx/st.txt" 2>&1
awk '{a[$1]=a[$1]" "$3} END{for(k in a) print k, a[k]}' "$work/hopx/split.txt"; cat "$work/hopx/st.txt"
