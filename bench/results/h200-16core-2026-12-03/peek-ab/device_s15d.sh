#!/usr/bin/env bash
# Session 15, call D (packed into $OUT/s15d.tgz): peek without the store-forwarding stall, A/B against the
# headers of the commit before (.old/inc_head). One round trip's code in one thread (st), the pinned
# 1-reader round trip (hopx rc), and ringcast-bench hop --readers 1 --pin, the two builds alternated.
set -uo pipefail
out=${OUT:-/tmp/out}; work=/tmp/s15d; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/s15d.tgz" -C "$work" . ; }
trap pack EXIT
date -u > "$work/start.txt"; cp .old/build-rev.txt "$work/build.txt"
rm -rf /tmp/oldsrc && mkdir -p /tmp/oldsrc && cp -r CMakeLists.txt cmake src include bench bindings tools tests examples /tmp/oldsrc/ 2>/dev/null
rm -rf /tmp/oldsrc/include && cp -r .old/inc_head/include /tmp/oldsrc/include
for v in new old; do
  src=.; [ $v = old ] && src=/tmp/oldsrc
  cmake -S $src -B /tmp/b-$v -DRINGCAST_BUILD_PYTHON=OFF -DRINGCAST_BUILD_TESTS=OFF -DRINGCAST_BENCH_ZMQ=OFF > "$work/configure-$v.log" 2>&1 || { tail -20 "$work/configure-$v.log"; exit 1; }
  cmake --build /tmp/b-$v -j16 --target ringcast_bench > "$work/build-$v.log" 2>&1 || { tail -30 "$work/build-$v.log"; exit 1; }
  I=include; [ $v = old ] && I=.old/inc_head/include
  g++ -std=c++20 -O2 -I$I .old/hopx/st.cpp /tmp/b-$v/libringcast.a -o /tmp/st_$v -lpthread
  g++ -std=c++20 -O2 -I$I .old/hopx/hopx.cpp /tmp/b-$v/libringcast.a -o /tmp/hopx_$v -lpthread
done
echo "built $(date -u +%T)"
for k in 1 2 3 4 5; do for v in old new; do echo "$v $(/tmp/st_$v)"; done; done > "$work/st.txt"
for k in 1 2 3 4 5; do for v in old new; do echo "$v $(/tmp/hopx_$v rc)"; done; done > "$work/hopx.txt"
awk '{a[$1]=a[$1]" "$(NF-1)} END{for(k in a) print "st", k, a[k]}' "$work/st.txt"
awk '{a[$1]=a[$1]" "$4} END{for(k in a) print "hopx rc", k, a[k]}' "$work/hopx.txt"
for k in 1 2 3; do for v in old new; do
  /tmp/b-$v/bench/ringcast-bench hop --readers 1 --rounds 7 --pin --json "$work/hop-$k-$v.json" > "$work/hop-$k-$v.txt" 2>&1
  echo "hop $k $v: $(grep -E '^hybrid +[0-9]' "$work/hop-$k-$v.txt" | head -1 | sed 's/  */ /g') | $(grep -E '^hybrid .*median' "$work/hop-$k-$v.txt" | sed 's/  */ /g')"
done; done
