#!/usr/bin/env bash
# Session 15, call C (packed into $OUT/s15c.tgz): bench_handover.py — what a transport can take off a sync
# Python step — W=2 and 8 (each run does both reply modes); 5 alternated rounds each. (As kept here: the
# first two calls ran W=16 and separate --single runs too, with the bench's earlier options.)
set -uo pipefail
out=${OUT:-/tmp/out}; work=/tmp/s15c; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/s15c.tgz" -C "$work" . ; }
trap pack EXIT
date -u > "$work/start.txt"; cp .old/build-rev.txt "$work/build.txt"
b=/tmp/b-s15c
py=python3
cmake -S . -B $b -DRINGCAST_BUILD_TESTS=OFF -DRINGCAST_BENCH_ZMQ=OFF -DPython_EXECUTABLE="$(command -v $py)" \
  -Dpybind11_DIR="$($py -m pybind11 --cmakedir)" > "$work/configure.log" 2>&1 || { tail -20 "$work/configure.log"; exit 1; }
cmake --build $b -j16 > "$work/build.log" 2>&1 || { tail -30 "$work/build.log"; exit 1; }
echo "built $(date -u +%T)"
for cfg in "2" "8"; do
  set -- $cfg; w=$1; shift
  tag="w$w${1:+-single}"
  PYTHONPATH=$b/python timeout 150 $py bench/python/bench_handover.py --workers $w --rounds 5 --steps 2000 > "$work/$tag.txt" 2>&1
  echo "== $tag rc=$? $(date -u +%T)"; sed -n '/round trip p50/,$p' "$work/$tag.txt"
done
