set -e
py=python3; pbd=$($py -m pybind11 --cmakedir)
mkdir -p /tmp/osrc && tar xzf .old/old.tgz -C /tmp/osrc
b() { cmake -S $1 -B $2 -DRINGCAST_BUILD_TESTS=OFF -DRINGCAST_BENCH_ZMQ=OFF -DPython_EXECUTABLE=$(command -v $py) -Dpybind11_DIR=$pbd >/dev/null 2>&1 && cmake --build $2 -j8 --target ringcast_python_core >/dev/null 2>&1; }
b /tmp/osrc /tmp/ob & b . /tmp/nb & wait
ls /tmp/ob/python/ringcast/_core*.so /tmp/nb/python/ringcast/_core*.so
mkdir -p /tmp/abo
for w in 8 2; do for r in 1 2; do for v in o n; do
  PYTHONPATH=/tmp/${v}b/python $py bench/showdown/showdown.py --workers $w --steps 300 --repeats 1 --variants ac --idle-seconds 0.5 --out /tmp/abo/$v$w$r > /tmp/abo/$v$w$r.txt 2>&1
  echo "$v W=$w r$r $(grep -E "^\(c\)" /tmp/abo/$v$w$r.txt | awk '{print $NF}' | tr '\n' ' ') a: $(grep -E "^\(a\)" /tmp/abo/$v$w$r.txt | awk '{print $NF}' | tr '\n' ' ')"
done; done; done
tar czf $OUT/abo.tgz -C /tmp abo
