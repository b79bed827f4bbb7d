#!/usr/bin/env bash
# Call F of 2026-12-06 (~09:12): the showdown at build da4ee4a (the step's calls without pybind11's
# dispatcher), W=8 then W=2, variants a c, 3 interleaved runs of 300 steps, torch loaded, pinned (the
# device budget left allows 3 runs, not 5), with its C++ floor; no strategy table, hop or GIL.
set -uo pipefail
out=${OUT:-/tmp/out}; work=/tmp/s38f; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/s38f.tgz" -C "$work" . ; }
trap pack EXIT
b=/tmp/b-s38f
date -u > "$work/start.txt"; cp .dev38/build-rev.txt "$work/build.txt"; cp "$0" "$work/"
cmake -S . -B "$b" -DRINGCAST_BUILD_TESTS=OFF -DRINGCAST_BENCH_ZMQ=OFF -DPython_EXECUTABLE="$(command -v python3)" \
  -Dpybind11_DIR="$(python3 -m pybind11 --cmakedir)" > "$work/configure.log" 2>&1
cmake --build "$b" -j16 --target ringcast_python_core ringcast_showdown_floor > "$work/build.log" 2>&1; echo "build rc=$? $(date -u +%T)"
for w in 8 2; do
  mkdir -p "$work/w$w"
  "$b/bench/showdown/ringcast-showdown-floor" --workers $w --json "$work/w$w/floor.json" > "$work/floor-w$w.txt" 2>&1
  fl=$(python3 -c 'import json,sys; r=[x for x in json.load(open(sys.argv[1]))["rows"] if x["collect"]=="gather doorbell" and x["replies"]=="all"]; print(r[0]["overhead_p50_us"])' "$work/w$w/floor.json")
  PYTHONPATH="$b/python" timeout 200 python3 bench/showdown/showdown.py --workers $w --steps 300 --repeats 3 --variants ac \
    --import-torch --cpp-floor-us "$fl" --out "$work/w$w" > "$work/showdown-w$w.txt" 2>&1
  echo "showdown W=$w rc=$? $(date -u +%T)"
  grep -E "^\s+\[|idle" "$work/showdown-w$w.txt" | head -16
done
echo "end $(date -u +%T)"
