#!/usr/bin/env bash
# A/B of the core hop and the C++ step floor: HEAD (o) vs working tree (n), alternated in one call.
set -u
mkdir -p /tmp/old && tar xzf .old/old.tgz -C /tmp/old
opts="-DRINGCAST_BUILD_PYTHON=OFF -DRINGCAST_BUILD_TESTS=OFF -DRINGCAST_BENCH_ZMQ=OFF"
tg="--target ringcast_bench --target ringcast_showdown_floor"
(cmake -S /tmp/old -B /tmp/bo $opts >/tmp/co.log 2>&1 && cmake --build /tmp/bo -j8 $tg >>/tmp/co.log 2>&1 || tail -20 /tmp/co.log) &
(cmake -S . -B /tmp/bn $opts >/tmp/cn.log 2>&1 && cmake --build /tmp/bn -j8 $tg >>/tmp/cn.log 2>&1 || tail -20 /tmp/cn.log) &
wait
echo "built $(date +%T)"; nproc; lscpu | grep "Model name"
for i in ${RUNS:-1 2}; do for pin in "" "--pin"; do for v in o n; do
  f=$OUT/s-$v-$i${pin:+-pin}.txt
  timeout 120 /tmp/b$v/bench/ringcast-bench strategies --readers 2 $pin > $f 2>&1
  echo "== $v run $i ${pin:-unpinned} $(date +%T)"; grep -E "^(spin|hybrid|hybrid_adapt|floor_atomic) " $f
done; done; done
for v in o n; do
  timeout 90 /tmp/b$v/bench/showdown/ringcast-showdown-floor --workers 2 > $OUT/floor-$v.txt 2>&1
  echo "== floor $v $(date +%T)"; grep -E "doorbell|rank by rank|waitv" $OUT/floor-$v.txt | head -6
done
