#!/usr/bin/env bash
# Session 19, call B: the core hop, baseline (HEAD, .old/base) against the working tree (the header
# line's stores in one run), alternated: ringcast-bench hop --pin, 1 and 2 readers, 4 rounds of each build.
set -uo pipefail
out=${OUT:-/tmp/out}; mkdir -p "$out"
date -u > "$out/start.txt"; cp .old/build-rev.txt "$out/build.txt"; git diff > "$out/change.diff" 2>/dev/null
for v in base new; do
  src=.; [ $v = base ] && src=.old/base
  cmake -S $src -B /tmp/b-$v -DCMAKE_BUILD_TYPE=Release -DRINGCAST_BUILD_TESTS=OFF -DRINGCAST_BENCH_ZMQ=OFF \
    -DRINGCAST_BUILD_PYTHON=OFF > "$out/configure-$v.log" 2>&1 || { tail -20 "$out/configure-$v.log"; exit 1; }
  cmake --build /tmp/b-$v -j16 --target ringcast_bench > "$out/build-$v.log" 2>&1 || { tail -30 "$out/build-$v.log"; exit 1; }
done
echo "built $(date -u +%T)"
for i in 1 2 3 4; do
  for v in base new; do
    for r in 1 2; do
      timeout 100 /tmp/b-$v/bench/ringcast-bench hop --readers $r --rounds 5 --pin > "$out/hop-$v-r$r-$i.txt" 2>&1
      echo "$v r=$r #$i: $(grep -E '^hybrid RTT' "$out/hop-$v-r$r-$i.txt" | cut -c1-80) | $(grep -E '^hybrid  ' "$out/hop-$v-r$r-$i.txt" | sed -n 2p | tr -s ' ' | cut -c1-90)"
    done
  done
done
date -u > "$out/end.txt"
