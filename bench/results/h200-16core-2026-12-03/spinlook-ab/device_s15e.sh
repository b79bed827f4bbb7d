#!/usr/bin/env bash
# Session 15, call E (packed into $OUT/s15e.tgz): three header sets alternated — head (the commit before),
# peek (peek returns its message from the value: no store-forwarding stall), spinlook (peek + a spin
# step looks at the stamp alone, the full look at checkpoints) — one round trip's code in one thread (st),
# the pinned 1-reader round trip (hopx rc), and ringcast-bench hop (rows bounded by time, the order
# reversed every other round) at R=1 pinned and R=2 unpinned.
set -uo pipefail
out=${OUT:-/tmp/out}; work=/tmp/s15e; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/s15e.tgz" -C "$work" . ; }
trap pack EXIT
date -u > "$work/start.txt"; cp .old/build-rev.txt "$work/build.txt"
for v in head peek spinlook; do
  src=/tmp/src-$v; rm -rf $src; mkdir -p $src
  cp -r CMakeLists.txt cmake src include bench bindings tools tests examples $src/ 2>/dev/null
  I=include
  if [ $v != spinlook ]; then rm -rf $src/include && cp -r .old/inc_$v/include $src/include; I=.old/inc_$v/include; fi
  cmake -S $src -B /tmp/b-$v -DRINGCAST_BUILD_PYTHON=OFF -DRINGCAST_BUILD_TESTS=OFF -DRINGCAST_BENCH_ZMQ=OFF > "$work/configure-$v.log" 2>&1 || { tail -20 "$work/configure-$v.log"; exit 1; }
  cmake --build /tmp/b-$v -j16 --target ringcast_bench > "$work/build-$v.log" 2>&1 || { tail -30 "$work/build-$v.log"; exit 1; }
  g++ -std=c++20 -O2 -I$I .old/hopx/st.cpp /tmp/b-$v/libringcast.a -o /tmp/st_$v -lpthread
  g++ -std=c++20 -O2 -I$I .old/hopx/hopx.cpp /tmp/b-$v/libringcast.a -o /tmp/hopx_$v -lpthread
done
echo "built $(date -u +%T)"
for k in 1 2 3 4 5; do for v in head peek spinlook; do echo "$v $(/tmp/st_$v)"; done; done > "$work/st.txt"
for k in 1 2 3 4 5; do for v in head peek spinlook; do echo "$v $(/tmp/hopx_$v rc)"; done; done > "$work/hopx.txt"
awk '{a[$1]=a[$1]" "$(NF-1)} END{for(k in a) print "st", k, a[k]}' "$work/st.txt"
awk '{a[$1]=a[$1]" "$4} END{for(k in a) print "hopx rc", k, a[k]}' "$work/hopx.txt"
for k in 1 2; do for v in head peek spinlook; do
  /tmp/b-$v/bench/ringcast-bench hop --readers 1 --rounds 7 --pin --json "$work/hop-r1-$k-$v.json" > "$work/hop-r1-$k-$v.txt" 2>&1
  echo "hop R=1 pin $k $v: $(grep -E '^(hybrid|hybrid_adapt) +[0-9.]+ .*median' "$work/hop-r1-$k-$v.txt" | sed 's/  */ /g' | tr '\n' '|')"
done; done
for v in head peek spinlook; do
  /tmp/b-$v/bench/ringcast-bench hop --readers 2 --rounds 7 --json "$work/hop-r2-$v.json" > "$work/hop-r2-$v.txt" 2>&1
  echo "hop R=2 nopin $v: $(grep -E '^(hybrid|hybrid_adapt) +[0-9.]+ .*median' "$work/hop-r2-$v.txt" | sed 's/  */ /g' | tr '\n' '|')"
done
