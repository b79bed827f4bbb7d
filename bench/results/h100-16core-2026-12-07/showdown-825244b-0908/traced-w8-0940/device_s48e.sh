#!/usr/bin/env bash
# Build 825244b (build.txt): the W=8 showdown traced (--trace: the pickling timed inside the enqueue, the
# hand-over and the collect), variants a c, 3 interleaved runs x 300 steps, pinned, every step kept (no torch:
# --trace refuses it).
set -uo pipefail
tag=${TAG:-s48e}
out=${OUT:-/tmp/out}; work=/tmp/$tag; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/$tag.tgz" -C "$work" --exclude='*.png' . ; }
trap pack EXIT
build=/tmp/b-s48
date -u > "$work/start.txt"; cp .dev48/build-rev.txt "$work/build.txt"; cp "$0" "$work/"
lscpu | grep -E "^Model:|^Model name" | tee "$work/machine.txt"
cmake -S . -B "$build" -DRINGCAST_BUILD_TESTS=OFF -DRINGCAST_BENCH_ZMQ=OFF -DPython_EXECUTABLE="$(command -v python3)" \
  -Dpybind11_DIR="$(python3 -m pybind11 --cmakedir)" > "$work/configure.log" 2>&1 && cmake --build "$build" -j16 --target ringcast_python_core > "$work/build.log" 2>&1 || { tail -30 "$work/build.log"; exit 1; }
echo "built $(date -u +%T)"
PYTHONPATH=$build/python timeout 300 python3 bench/showdown/showdown.py --workers 8 --steps 300 --repeats 3 --variants ac --trace --dump-steps --out "$work/w8" > "$work/w8.txt" 2>&1
echo "showdown rc=$? $(date -u +%T)"; pack
sed -n '/^executor showdown/,$p' "$work/w8.txt" | head -90
echo "end $(date -u +%T)"
