#!/usr/bin/env bash
# Build cd43a66 (build.txt; the library as at 825244b but for comments): the sync steps traced at W=2 and
# W=8 (--trace: the pickling timed inside the enqueue, the hand-over and the collect), variants a c, 3
# interleaved runs x 300 steps each, pinned, no torch (--trace refuses it), every step kept.
set -uo pipefail
tag=${TAG:-s48f}
out=${OUT:-/tmp/out}; work=/tmp/$tag; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/$tag.tgz" -C "$work" --exclude='*.png' . ; }
trap pack EXIT
build=/tmp/b-s48
date -u > "$work/start.txt"; cp .dev48/build-rev.txt "$work/build.txt"; cp "$0" "$work/"
lscpu | grep -E "^Model:|^Model name" | tee "$work/machine.txt"
cmake -S . -B "$build" -DRINGCAST_BUILD_TESTS=OFF -DRINGCAST_BENCH_ZMQ=OFF -DPython_EXECUTABLE="$(command -v python3)" \
  -Dpybind11_DIR="$(python3 -m pybind11 --cmakedir)" > "$work/configure.log" 2>&1 && cmake --build "$build" -j16 --target ringcast_python_core > "$work/build.log" 2>&1 || { tail -30 "$work/build.log"; exit 1; }
echo "built $(date -u +%T)"
for w in 2 8; do
  PYTHONPATH=$build/python timeout 150 python3 bench/showdown/showdown.py --workers $w --steps 300 --repeats 3 --variants ac --trace --dump-steps --out "$work/w$w" > "$work/w$w.txt" 2>&1
  echo "showdown w$w rc=$? $(date -u +%T)"; pack
  sed -n '/^the same sync step with its pickling taken out/,/^$/p' "$work/w$w.txt"
  grep -E "^\s+\[sync|^\s+\[async" "$work/w$w.txt" | head -6
done
echo "end $(date -u +%T)"
