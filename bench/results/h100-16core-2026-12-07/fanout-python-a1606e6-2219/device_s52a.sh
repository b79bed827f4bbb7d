#!/usr/bin/env bash
# bench/python/bench_fanout.py (committed at 782c5d2; tree at the rev in build-rev.txt): rank 0's hand-over of the showdown's request in
# Python while the other workers wait on the ring, compute, or sleep; W=8 twice, W=2, W=8 with a 20 us gap, W=8, W=4.
set -uo pipefail
tag=${TAG:-s52a}
out=${OUT:-/tmp/out}; work=/tmp/$tag; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/$tag.tgz" -C "$work" . ; }
trap pack EXIT
cp .dev52/build-rev.txt "$work/" 2>/dev/null; date -u > "$work/start.txt"; cp "$0" "$work/"; git status --short > "$work/tree-status.txt" 2>&1
lscpu > "$work/lscpu.txt"; grep -E "^Model:|^Model name" "$work/lscpu.txt"
cmake -S . -B /tmp/b -DRINGCAST_BUILD_TESTS=OFF -DRINGCAST_BUILD_BENCH=OFF -DRINGCAST_BUILD_TOOLS=OFF -DRINGCAST_CUDA=OFF -DRINGCAST_HIP=OFF \
  -DPython_EXECUTABLE="$(command -v python3)" -Dpybind11_DIR="$(python3 -m pybind11 --cmakedir)" > "$work/conf.log" 2>&1 \
  && cmake --build /tmp/b -j16 --target ringcast_python_core > "$work/build.log" 2>&1 || { tail -30 "$work/conf.log" "$work/build.log"; exit 1; }
echo "built $(date -u +%T)"
fo() { local n=$1; shift; PYTHONPATH=/tmp/b/python timeout 100 python3 bench/python/bench_fanout.py "$@" > "$work/$n.txt" 2>&1; echo "== $n rc=$? $(date -u +%T)"; cat "$work/$n.txt"; pack; }
fo w8-1 --workers 8

fo w8-2 --workers 8
fo w2 --workers 2
fo w8-gap20 --workers 8 --gap-us 20
fo w8-3 --workers 8
fo w4 --workers 4
echo "end $(date -u +%T)"
