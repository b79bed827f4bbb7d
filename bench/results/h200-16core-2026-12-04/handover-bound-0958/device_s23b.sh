#!/usr/bin/env bash
# Call B (packed into $OUT/s23b.tgz): the C++ floor of the showdown's step and bench_handover.py with it
# (--cpp-floor-json: the bound on (c)/(a) of a transport costing only the C++ floor), W=2 and 8, 5
# alternated rounds of 2000 round trips each.
set -uo pipefail
out=${OUT:-/tmp/out}; work=/tmp/s23b; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/s23b.tgz" -C "$work" . ; }
trap pack EXIT
date -u > "$work/start.txt"; cp .old/build-rev.txt "$work/build.txt"; cp "$0" "$work/"
b=/tmp/b-s23b; py=python3
cmake -S . -B $b -DRINGCAST_BUILD_TESTS=OFF -DRINGCAST_BENCH_ZMQ=OFF -DPython_EXECUTABLE="$(command -v $py)" \
  -Dpybind11_DIR="$($py -m pybind11 --cmakedir)" > "$work/configure.log" 2>&1 || { tail -20 "$work/configure.log"; exit 1; }
cmake --build $b -j16 > "$work/build.log" 2>&1 || { tail -30 "$work/build.log"; exit 1; }
echo "built $(date -u +%T)"
for w in 2 8; do
  $b/bench/showdown/ringcast-showdown-floor --workers $w --json "$work/floor-w$w.json" > "$work/floor-w$w.txt" 2>&1
  PYTHONPATH=$b/python timeout 200 $py bench/python/bench_handover.py --workers $w --rounds 5 --steps 2000 \
    --cpp-floor-json "$work/floor-w$w.json" > "$work/w$w.txt" 2>&1
  echo "== w$w rc=$? $(date -u +%T)"; cat "$work/floor-w$w.txt"; sed -n '/round trip p50/,$p' "$work/w$w.txt"
done
