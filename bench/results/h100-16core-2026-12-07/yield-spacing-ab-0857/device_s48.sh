#!/usr/bin/env bash
# A/B: base = .dev48/base (an export of HEAD without the change), cand = the working tree (YieldSpacing: yields that return at
# once are spaced out). 1) all 9 other showdown CPUs waiting at once beside worker 0's loop: none, pause,
# the polite spin of base and of cand (neighbour_probe.py --together --polite-from), a Python yield poller;
# 2) showdown W=8 a c, base/cand alternated twice, 2 runs x 300 steps each, torch; 3) the one-neighbour probe (base, 3 rounds); 4) hop x3 on model 207.
set -uo pipefail
tag=${TAG:-s48}
out=${OUT:-/tmp/out}; work=/tmp/$tag; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/$tag.tgz" -C "$work" --exclude='*.log' . ; }
trap pack EXIT
date -u > "$work/start.txt"; git rev-parse --short HEAD > "$work/build.txt"; cp "$0" "$work/"; git diff > "$work/change.diff"
lscpu | grep -E "^Model:|^Model name|^Thread|^Core|^NUMA node" | tee "$work/machine.txt"
model=$(lscpu | sed -n 's/^Model: *//p')
bld() {  # $1 source, $2 build dir
  cmake -S "$1" -B "$2" -DRINGCAST_BUILD_TESTS=OFF -DRINGCAST_BENCH_ZMQ=OFF -DPython_EXECUTABLE="$(command -v python3)" \
    -Dpybind11_DIR="$(python3 -m pybind11 --cmakedir)" > "$work/configure-$(basename $2).log" 2>&1 &&
  cmake --build "$2" -j8 --target ringcast_python_core ringcast_neighbour > "$work/build-$(basename $2).log" 2>&1
}
bld .dev48/base /tmp/base & pb=$!
bld . /tmp/cand & pc=$!
wait $pb || { tail -20 "$work/build-base.log"; exit 1; }
wait $pc || { tail -20 "$work/build-cand.log"; exit 1; }
echo "built $(date -u +%T)"
PYTHONPATH=/tmp/cand/python timeout 90 python3 bench/showdown/neighbour_probe.py --neighbour /tmp/cand/bench/showdown/ringcast-neighbour \
  --together --modes pause,polite,pyyield --polite-from base=/tmp/base/bench/showdown/ringcast-neighbour --rounds 4 --loops 150 \
  --json "$work/together.json" > "$work/together.txt" 2>"$work/together-err.txt"; echo "together rc=$? $(date -u +%T)"; cat "$work/together.txt"; pack
for r in base-1 cand-1 base-2 cand-2; do
  PYTHONPATH=/tmp/${r%-*}/python timeout 80 python3 bench/showdown/showdown.py --workers 8 --steps 300 --repeats 2 --variants ac \
    --import-torch --out "$work/sd-$r" > "$work/sd-$r.txt" 2>&1; echo "showdown $r rc=$? $(date -u +%T)"; pack
  grep -E "^\((a|c)\)" "$work/sd-$r.txt" | head -16
done
PYTHONPATH=/tmp/base/python timeout 60 python3 bench/showdown/neighbour_probe.py --neighbour /tmp/base/bench/showdown/ringcast-neighbour \
  --rounds 3 --json "$work/neighbour.json" > "$work/neighbour.txt" 2>"$work/neighbour-err.txt"; echo "probe rc=$? $(date -u +%T)"; cat "$work/neighbour.txt"; pack
if [ "$model" = 207 ] && cmake --build /tmp/cand -j16 --target ringcast_bench > "$work/build-bench.log" 2>&1; then
  for i in 1 2 3; do timeout 50 /tmp/cand/bench/ringcast-bench hop --readers 1 --json "$work/hop-$i.json" > "$work/hop-$i.txt" 2>&1
    echo "hop $i rc=$? $(date -u +%T) $(grep -E '^hybrid RTT' "$work/hop-$i.txt" | sed -E 's/.*rounds: ([0-9.]+).*/\1/' | tr '\n' ' ')"; pack; done
fi
echo "end $(date -u +%T)"
