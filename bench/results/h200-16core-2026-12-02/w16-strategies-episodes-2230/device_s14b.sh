#!/usr/bin/env bash
# Session 14, call B (packed into $OUT/s14b.tgz): showdown W=16 (a c d, 3 runs), two more strategy tables
# (the core hop: 3 with the one of the showdown), bench_speed_episodes.py.
set -uo pipefail
out=${OUT:-/tmp/out}; work=/tmp/s14b; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/s14b.tgz" -C "$work" . ; }
trap pack EXIT
export BUILD_DIR=/tmp/b-s14
date -u > "$work/start.txt"; cp .old/build-rev.txt "$work/build.txt"
SHOWDOWN_ARGS="--variants acd" WORKERS="16" REPEATS=3 STEPS=300 timeout 330 bash bench/showdown/device_showdown.sh "$work/sd16" > "$work/sd16-log.txt" 2>&1
echo "w16 rc=$? $(date -u +%T)"; grep -E "targets|\[|full speed|% of steps|fastest tenth" "$work/sd16-log.txt" | tail -30
rm -f "$work/sd16/showdown.tgz"
for i in 2 3; do
  "$BUILD_DIR/bench/ringcast-bench" strategies --readers 2 --json "$work/strategies-$i.json" > "$work/strategies-$i.txt" 2>&1
done
grep -iE "floor|adaptive|hybrid" "$work/sd16/strategies.txt" "$work/strategies-2.txt" "$work/strategies-3.txt" | head -24
timeout 120 python3 bench/python/bench_speed_episodes.py > "$work/speed-episodes.txt" 2>&1; echo "episodes rc=$?"
grep -E "fastest tenth|none|others busy \(round 1\)" "$work/speed-episodes.txt" | head -12
