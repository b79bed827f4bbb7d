#!/usr/bin/env bash
# A/B: waits near the spin cap predicted (n = working tree) or not (o = HEAD); showdown (a) vs (c),
# W=8, work 1.8 ms, alternated o, n, 3 rounds.
set -u
mkdir -p /tmp/old && tar xzf .old/old.tgz -C /tmp/old
py=python3
opts="-DRINGCAST_BUILD_TESTS=OFF -DRINGCAST_BENCH_ZMQ=OFF -DPython_EXECUTABLE=$(command -v $py) -Dpybind11_DIR=$($py -m pybind11 --cmakedir)"
(cmake -S /tmp/old -B /tmp/bo $opts >/tmp/co.log 2>&1 && cmake --build /tmp/bo -j8 >>/tmp/co.log 2>&1 || tail -20 /tmp/co.log) &
(cmake -S . -B /tmp/bn $opts >/tmp/cn.log 2>&1 && cmake --build /tmp/bn -j8 >>/tmp/cn.log 2>&1 || tail -20 /tmp/cn.log) &
wait
echo "built $(date +%T)"
mkdir -p $OUT/nc
for i in 1 2 3; do for v in o n; do
  src=.; [ $v = o ] && src=/tmp/old
  f=$OUT/nc/nc-$v-$i.txt
  PYTHONPATH=/tmp/b$v/python timeout 150 $py $src/bench/showdown/showdown.py --workers ${W:-8} --work-ms ${WORK:-1.8} --variants ac --steps 300 --repeats 1 --out /tmp/sd-$v-$i > $f 2>&1
  echo "== $v round $i $(date +%T)"; grep -E "^\(|sleeps/step" $f | head -20
done; done
cd $OUT && tar czf nc.tgz nc && rm -rf nc
