#!/usr/bin/env bash
# The build at HEAD (build.txt), reusing /tmp/b-s48 where the machine kept it: the core hop with its
# floor rows (3 invocations), the GIL stretch (5 x 1 s), the idle control (a Python+torch process that
# only sleeps, without and with a queue open: 20 readings each).
set -uo pipefail
tag=${TAG:-s48c}
out=${OUT:-/tmp/out}; work=/tmp/$tag; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/$tag.tgz" -C "$work" . ; }
trap pack EXIT
build=/tmp/b-s48
date -u > "$work/start.txt"; cp .dev48/build-rev.txt "$work/build.txt"; cp "$0" .dev48/idle_exec.py "$work/"
lscpu | grep -E "^Model:|^Model name" | tee "$work/machine.txt"
[ -x $build/bench/ringcast-bench ] && echo "build kept" || { cmake -S . -B "$build" -DRINGCAST_BUILD_TESTS=OFF -DRINGCAST_BENCH_ZMQ=OFF -DPython_EXECUTABLE="$(command -v python3)" \
  -Dpybind11_DIR="$(python3 -m pybind11 --cmakedir)" > "$work/configure.log" 2>&1 && cmake --build "$build" -j16 --target ringcast_bench ringcast_python_core > "$work/build.log" 2>&1 || { tail -30 "$work/build.log"; exit 1; }; }
echo "built $(date -u +%T)"
for i in 1 2 3; do timeout 50 $build/bench/ringcast-bench hop --readers 1 --json "$work/hop-$i.json" > "$work/hop-$i.txt" 2>&1
  echo "hop $i rc=$? $(date -u +%T) $(grep -E '^hybrid RTT' "$work/hop-$i.txt" | sed -E 's/.*rounds: ([0-9.]+).*/\1/' | tr '\n' ' ')"; pack; done
PYTHONPATH=$build/python timeout 90 python3 bench/python/bench_gil.py --runs 5 > "$work/gil.txt" 2>&1; echo "gil rc=$? $(date -u +%T)"; tail -8 "$work/gil.txt"; pack
for m in plain ringcast; do PYTHONPATH=$build/python timeout 40 python3 .dev48/idle_exec.py $m 20 > "$work/idle-$m.txt" 2>&1; echo "idle $m rc=$?"; tail -1 "$work/idle-$m.txt"; done
echo "end $(date -u +%T)"
