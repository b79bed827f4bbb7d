#!/usr/bin/env bash
# The working tree after bfc2078 with showdown.py's new --settle-others (uncommitted when run): the showdown
# at W=8, variants a c, 3 interleaved runs of 300 steps, torch loaded, pinned, --settle-others (single-rank
# sync steps start with all 8 workers waiting, as all-rank ones do). Does the all / single gap close?
set -uo pipefail
tag=${TAG:-s50c}
out=${OUT:-/tmp/out}; work=/tmp/$tag; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/$tag.tgz" -C "$work" . ; }
trap pack EXIT
build=/tmp/b-s50c
date -u > "$work/start.txt"; cp "$0" "$work/"; git diff > "$work/tree.diff" 2>&1
lscpu | grep -E "^Model:|^Model name" | tee "$work/machine.txt"
cmake -S . -B "$build" -DRINGCAST_BUILD_TESTS=OFF -DRINGCAST_BENCH_ZMQ=OFF -DRINGCAST_CUDA=OFF -DRINGCAST_HIP=OFF -DPython_EXECUTABLE="$(command -v python3)" \
  -Dpybind11_DIR="$(python3 -m pybind11 --cmakedir)" > "$work/configure.log" 2>&1 && cmake --build "$build" -j16 --target ringcast_python_core > "$work/build.log" 2>&1 || { tail -30 "$work/configure.log" "$work/build.log"; exit 1; }
echo "built $(date -u +%T)"
mkdir -p "$work/w8"
PYTHONPATH="$build/python" timeout 200 python3 bench/showdown/showdown.py --workers 8 --steps 300 --repeats 3 --variants ac \
  --import-torch --settle-others --dump-steps --out "$work/w8" > "$work/showdown-w8.txt" 2>&1
echo "showdown rc=$? $(date -u +%T)"; pack
grep -E "^\((a|c)\) .*sync|^python floor|^  \[|^    " "$work/showdown-w8.txt" | head -30
python3 bench/showdown/all_single.py "$work/w8/steps.json.gz" | tail -2
echo "end $(date -u +%T)"
