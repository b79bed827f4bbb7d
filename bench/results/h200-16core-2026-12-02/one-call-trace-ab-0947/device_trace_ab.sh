#!/usr/bin/env bash
# Device call C: traced A/B of the one-call paths: o = 7d97dc8 (before), n = working tree; W=2 and W=8, variants a c, alternated.
set -u
py=python3
mkdir -p /tmp/old && tar xzf .old/old.tgz -C /tmp/old
opts="-DRINGCAST_BUILD_TESTS=OFF -DRINGCAST_BENCH_ZMQ=OFF -DPython_EXECUTABLE=$(command -v $py) -Dpybind11_DIR=$($py -m pybind11 --cmakedir)"
(cmake -S /tmp/old -B /tmp/bo $opts >/tmp/co.log 2>&1 && cmake --build /tmp/bo -j8 --target ringcast_python_core >>/tmp/co.log 2>&1 || tail -20 /tmp/co.log) &
(cmake -S . -B /tmp/bn $opts >/tmp/cn.log 2>&1 && cmake --build /tmp/bn -j8 --target ringcast_python_core >>/tmp/cn.log 2>&1 || tail -20 /tmp/cn.log) &
wait
echo "built $(date +%T)"
for i in 1 2 3 4; do for w in 2 8; do
  if [ $((i % 2)) = 1 ]; then order="o n"; else order="n o"; fi
  for v in $order; do
    d=/tmp/ab/r$i-w$w-$v; mkdir -p $d
    PYTHONPATH=/tmp/b$v/python timeout 100 $py bench/showdown/showdown.py --workers $w --steps 300 --repeats 1 --variants ac --trace --out $d > $d/showdown.txt 2>&1
    echo "== round $i W=$w $v $(date +%T)"; grep -E "^\((a|c)\).*(sync|async) " $d/showdown.txt | cut -c1-150
  done
done; done
tar czf $OUT/ab.tgz -C /tmp ab
