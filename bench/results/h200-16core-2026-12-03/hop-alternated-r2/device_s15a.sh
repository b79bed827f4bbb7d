#!/usr/bin/env bash
# Session 15, call A (packed into $OUT/s15a.tgz): the core hop with the floor alternated (ringcast-bench hop,
# pinned and unpinned, 3 calls each); the hop experiments (.old/hopx: protocol parts taken out, 1 reader);
# the GIL bench twice.
set -uo pipefail
out=${OUT:-/tmp/out}; work=/tmp/s15a; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/s15a.tgz" -C "$work" . ; }
trap pack EXIT
date -u > "$work/start.txt"; cp .old/build-rev.txt "$work/build.txt"
b=/tmp/b-s15
py=python3
cmake -S . -B $b -DRINGCAST_BUILD_TESTS=OFF -DRINGCAST_BENCH_ZMQ=OFF -DPython_EXECUTABLE="$(command -v $py)" \
  -Dpybind11_DIR="$($py -m pybind11 --cmakedir)" > "$work/configure.log" 2>&1 || { tail -20 "$work/configure.log"; exit 1; }
cmake --build $b -j16 > "$work/build.log" 2>&1 || { tail -30 "$work/build.log"; exit 1; }
echo "built $(date -u +%T)"
for call in 1 2 3; do
  for mode in pin nopin; do
    flag=""; [ $mode = pin ] && flag=--pin
    $b/bench/ringcast-bench hop --readers 2 --rounds 7 $flag --json "$work/hop-$call-$mode.json" > "$work/hop-$call-$mode.txt" 2>&1
    echo "hop $call $mode: $(grep -E '^(spin|hybrid|hybrid_adapt) .*median|^hybrid RTT' "$work/hop-$call-$mode.txt" | sed 's/  */ /g' | tr '\n' '|')"
  done
done
# experiments: 1 writer, 1 reader pinned to CPUs 0 and 1; inc = the library as is
mkdir -p "$work/hopx"
for v in inc inc_e1 inc_e2 inc_e123; do
  I=include; [ $v != inc ] && I=.old/hopx/$v
  g++ -std=c++20 -O2 -I$I .old/hopx/hopx.cpp $b/libringcast.a -o /tmp/hopx_$v -lpthread 2>> "$work/hopx/build.log"
  g++ -std=c++20 -O2 -I$I .old/hopx/st.cpp $b/libringcast.a -o /tmp/st_$v -lpthread 2>> "$work/hopx/build.log"
done
for k in 1 2 3 4 5; do
  /tmp/hopx_inc floor | sed "s/^/floor /"
  for v in inc inc_e1 inc_e2 inc_e123; do /tmp/hopx_$v rc | sed "s/^/$v /"; done
done > "$work/hopx/rtt.txt" 2>&1
for v in inc inc_e123; do /tmp/st_$v; /tmp/st_$v; done > "$work/hopx/st.txt" 2>&1
awk '{a[$1]=a[$1]" "$4} END{for(k in a) print k, a[k]}' "$work/hopx/rtt.txt"; cat "$work/hopx/st.txt"
for k in 1 2; do PYTHONPATH=$b/python timeout 200 $py bench/python/bench_gil.py --runs 5 > "$work/gil-$k.txt" 2>&1; echo "gil $k rc=$?"; done
grep -iE "stretch|paced|floor" "$work"/gil-*.txt | head -30
