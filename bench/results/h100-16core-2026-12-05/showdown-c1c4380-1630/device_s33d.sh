#!/usr/bin/env bash
# Call D of 2026-12-05 16:30 UTC on (packed into $OUT/s33d.tgz): the showdown at HEAD with torch loaded
# (--import-torch), W=2 and 8, variants a c, 7 interleaved runs of 300 steps, pinned, the strategy table
# first; then the core hop (3 runs), the GIL stretch (5 x 1 s) and bench_collect_width.py at W=8 and W=2.
set -uo pipefail
out=${OUT:-/tmp/out}; work=/tmp/s33d; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; rm -f "$work/sd/showdown.tgz"; tar czf "$out/s33d.tgz" -C "$work" . ; }
trap pack EXIT
build=/tmp/b-s33d
date -u > "$work/start.txt"; cp .dev33/build-rev.txt "$work/build.txt"; cp "$0" "$work/"
SHOWDOWN_ARGS="--variants ac --import-torch" WORKERS="2 8" REPEATS=7 STEPS=300 BUILD_DIR=$build timeout 430 bash bench/showdown/device_showdown.sh "$work/sd" > "$work/sd-log.txt" 2>&1
echo "showdown rc=$? $(date -u +%T)"
grep -E "x atomic|hybrid " "$work/sd/strategies.txt" | head -8
grep -E "^\s+\[|idle|torch loaded|^== showdown" "$work/sd-log.txt" | tail -40
for i in 1 2 3; do timeout 30 $build/bench/ringcast-bench hop --readers 1 > "$work/hop-$i.txt" 2>&1; echo "hop $i rc=$?"; tail -3 "$work/hop-$i.txt"; done
PYTHONPATH=$build/python timeout 40 python3 bench/python/bench_gil.py --runs 5 > "$work/gil.txt" 2>&1; echo "gil rc=$?"; tail -6 "$work/gil.txt"
for w in 8 2; do PYTHONPATH=$build/python timeout 40 python3 bench/python/bench_collect_width.py --workers $w > "$work/cw-w$w.txt" 2>&1; echo "cw w$w rc=$?"; tail -8 "$work/cw-w$w.txt"; done
echo "end $(date -u +%T)"
