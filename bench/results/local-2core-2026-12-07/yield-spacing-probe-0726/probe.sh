#!/usr/bin/env bash
# The together probe alone (what little device time is left): the showdown's worker-0 loop beside all 9
# other W=8 showdown CPUs waiting at once: none, pause, the polite spin of cand (the working tree:
# YieldSpacing) and of base (.dev46/base = HEAD's library), a Python yield poller. Then the one-neighbour
# probe if time is left.
set -uo pipefail
tag=${TAG:-s47p}
out=${OUT:-/tmp/out}; work=/tmp/$tag; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/$tag.tgz" -C "$work" --exclude='*.log' . ; }
trap pack EXIT
date -u > "$work/start.txt"; cp .dev46/build-rev.txt "$work/build.txt"; cp "$0" "$work/"; git diff > "$work/change.diff"
lscpu | grep -E "^Model:|^Model name|^Thread|^Core|^NUMA node" | tee "$work/machine.txt"
cfg() { cmake -S "$1" -B "$2" -DRINGCAST_BUILD_TESTS=OFF -DRINGCAST_BENCH_ZMQ=OFF -DPython_EXECUTABLE="$(command -v python3)" \
    -Dpybind11_DIR="$(python3 -m pybind11 --cmakedir)" > "$work/configure-$(basename $2).log" 2>&1; }
(cfg .dev46/base /tmp/base && cmake --build /tmp/base -j4 --target ringcast_neighbour > "$work/build-base.log" 2>&1) & pb=$!
(cfg . /tmp/cand && cmake --build /tmp/cand -j12 --target ringcast_python_core ringcast_neighbour > "$work/build-cand.log" 2>&1) & pc=$!
wait $pb || { tail -20 "$work/build-base.log" "$work/configure-base.log"; exit 1; }
wait $pc || { tail -20 "$work/build-cand.log" "$work/configure-cand.log"; exit 1; }
echo "built $(date -u +%T)"
PYTHONPATH=/tmp/cand/python timeout 100 python3 bench/showdown/neighbour_probe.py --neighbour /tmp/cand/bench/showdown/ringcast-neighbour \
  --together --modes pause,polite,pyyield --polite-from base=/tmp/base/bench/showdown/ringcast-neighbour --rounds 4 --loops 150 \
  --json "$work/together.json" > "$work/together.txt" 2>"$work/together-err.txt"; echo "together rc=$? $(date -u +%T)"; cat "$work/together.txt" "$work/together-err.txt"; pack
PYTHONPATH=/tmp/cand/python timeout 60 python3 bench/showdown/neighbour_probe.py --neighbour /tmp/base/bench/showdown/ringcast-neighbour \
  --rounds 3 --json "$work/neighbour.json" > "$work/neighbour.txt" 2>"$work/neighbour-err.txt"; echo "probe rc=$? $(date -u +%T)"; cat "$work/neighbour.txt"; pack
echo "end $(date -u +%T)"
