#!/usr/bin/env bash
# Call B of 2026-12-06 (session 39), the machine of call A (its build): the showdown at W=16 (17 processes on
# 16 CPUs, not pinned), variants a c, 5 interleaved runs of 300 steps, torch loaded; then the core hop
# (3 runs), bench_handover at W=8 with the C++ floor of the same W (the bound at zero work), and the
# cost of membarrier(GLOBAL_EXPEDITED) (membarrier_probe.c).
set -uo pipefail
out=${OUT:-/tmp/out}; work=/tmp/s39b; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/s39b.tgz" -C "$work" . ; }
trap pack EXIT
build=/tmp/b-s39a
date -u > "$work/start.txt"; cp .dev39/build-rev.txt "$work/build.txt"; cp "$0" "$work/"
SHOWDOWN_ARGS="--variants ac --import-torch" WORKERS="16" REPEATS=5 STEPS=300 BUILD_DIR=$build timeout 360 bash bench/showdown/device_showdown.sh "$work/sd16" > "$work/sd16-log.txt" 2>&1
echo "showdown w16 rc=$? $(date -u +%T)"
grep -E "^\s+\[|idle|^== showdown" "$work/sd16-log.txt" | tail -20
for i in 1 2 3; do timeout 30 $build/bench/ringcast-bench hop --readers 1 > "$work/hop-$i.txt" 2>&1; echo "hop $i rc=$?"; tail -3 "$work/hop-$i.txt"; done
timeout 30 $build/bench/showdown/ringcast-showdown-floor --workers 8 --json "$work/floor-w8.json" > "$work/floor-w8.txt" 2>&1
PYTHONPATH=$build/python timeout 120 python3 bench/python/bench_handover.py --workers 8 --cpp-floor-json "$work/floor-w8.json" > "$work/handover-w8.txt" 2>&1; echo "handover rc=$?"; tail -12 "$work/handover-w8.txt"

# The asymmetric fence's price: membarrier(GLOBAL_EXPEDITED) with 0, 1, 7 and 14 spinning processes.
gcc -O2 -Wall .dev39/membarrier_probe.c -o /tmp/mbp && cp .dev39/membarrier_probe.c "$work/" && for r in 1 2 3; do for n in 0 1 7 14; do timeout 20 /tmp/mbp $n; done; done > "$work/membarrier.txt" 2>&1; cat "$work/membarrier.txt"
echo "end2 $(date -u +%T)"
