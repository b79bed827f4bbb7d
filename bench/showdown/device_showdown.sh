#!/usr/bin/env bash
# Builds the library, the Python binding and the benchmarks on a bigger machine (the 16-core H200 machine
# through the device tool: pybind11 from pip there, no apt, no ZeroMQ) and runs the executor showdown
# for W = 2, 4, 8 workers, its C++ floor, the wait-strategy table and the neighbour probe. Writes into
# $1 (default ./out).
# Environment: WORKERS, STEPS, REPEATS; SHOWDOWN_ARGS, more options for showdown.py (e.g. --trace).
set -euo pipefail
out=${1:-out}; mkdir -p "$out"
build=${BUILD_DIR:-/tmp/ringcast-showdown-build}
py=${PYTHON:-python3}
cmake -S . -B "$build" -DRINGCAST_BUILD_TESTS=OFF -DRINGCAST_BENCH_ZMQ=OFF -DPython_EXECUTABLE="$(command -v "$py")" \
  -Dpybind11_DIR="$("$py" -m pybind11 --cmakedir)" >"$out/configure.log" 2>&1 || { tail -40 "$out/configure.log"; exit 1; }
cmake --build "$build" -j"$(nproc)" >"$out/build.log" 2>&1 || { tail -60 "$out/build.log"; exit 1; }
"$build/bench/ringcast-bench" strategies --readers 2 --json "$out/strategies.json" 2>&1 | tee "$out/strategies.txt"
# Does a waiter on one CPU slow the workers' Python on another (the end-to-end step)? ~15 s.
# A probe that fails says why in its .err file and does not stop the showdowns after it.
PYTHONPATH="$build/python" "$py" bench/showdown/neighbour_probe.py --neighbour "$build/bench/showdown/ringcast-neighbour" \
  --rounds 3 --json "$out/neighbour.json" 2>"$out/neighbour.err" | tee "$out/neighbour.txt" ||
  echo "the neighbour probe failed: $out/neighbour.err"
# And with the executor's and every other worker's CPU waiting at once, as in a W=8 step. ~10 s.
PYTHONPATH="$build/python" "$py" bench/showdown/neighbour_probe.py --neighbour "$build/bench/showdown/ringcast-neighbour" \
  --together --rounds 3 --json "$out/neighbour-together.json" 2>"$out/neighbour-together.err" | tee "$out/neighbour-together.txt" ||
  echo "the together probe failed: $out/neighbour-together.err"
for w in ${WORKERS:-2 8}; do
  mkdir -p "$out/w$w"
  "$build/bench/showdown/ringcast-showdown-floor" --workers "$w" --json "$out/w$w/floor.json" 2>&1 | tee "$out/floor-w$w.txt"
  # The plot draws the C++ floor of the same step: the gather doorbell collecting every rank. Not with
  # more processes than CPUs (W + 1 > nproc): there the floor's spinning executor keeps a CPU busy, two
  # of its workers share one, and its all-rank step takes two works (16 workers on 16 CPUs: 205 us
  # over a 200 us step) — a measure of that machine's oversubscription, not a floor (floor-wW.txt).
  floor_arg=()
  if (( w + 1 <= $(nproc) )); then
    floor_arg=(--cpp-floor-us "$("$py" -c 'import json,sys; r=[x for x in json.load(open(sys.argv[1]))["rows"] if x["collect"]=="gather doorbell" and x["replies"]=="all"]; print(r[0]["overhead_p50_us"])' "$out/w$w/floor.json")")
  else
    echo "(the C++ floor is not drawn for W=$w: $((w + 1)) processes on $(nproc) CPUs)"
  fi
  echo "== showdown W=$w"
  PYTHONPATH="$build/python" "$py" bench/showdown/showdown.py --workers "$w" --steps "${STEPS:-300}" --repeats "${REPEATS:-3}" \
    "${floor_arg[@]}" --out "$out/w$w" ${SHOWDOWN_ARGS:-} 2>&1 | tee "$out/showdown-w$w.txt"
done
uname -a > "$out/machine.txt"; lscpu | head -20 >> "$out/machine.txt"; nproc >> "$out/machine.txt"
tar czf "$out/showdown.tgz" -C "$out" w* 2>/dev/null || true
