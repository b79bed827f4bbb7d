#!/usr/bin/env bash
# Call A of 2026-12-05 (this stop) (packed into $OUT/s29a.tgz): the showdown at HEAD with torch loaded in every process
# (--import-torch), W=2 and 8, variants a c, 7 interleaved runs of 300 steps (more runs than before:
# steadier medians), the strategy table first; then the core hop (3 runs) and the GIL stretch (5 x 1 s).
set -uo pipefail
out=${OUT:-/tmp/out}; work=/tmp/s29a; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; rm -f "$work/sd/showdown.tgz"; tar czf "$out/s29a.tgz" -C "$work" . ; }
trap pack EXIT
build=/tmp/b-s29a
date -u > "$work/start.txt"; cp .dev29/build-rev.txt "$work/build.txt"; cp "$0" "$work/"
SHOWDOWN_ARGS="--variants ac --import-torch" WORKERS="2 8" REPEATS=7 STEPS=300 BUILD_DIR=$build timeout 440 bash bench/showdown/device_showdown.sh "$work/sd" > "$work/sd-log.txt" 2>&1
echo "showdown rc=$? $(date -u +%T)"
grep -E "x atomic|hybrid " "$work/sd/strategies.txt" | head -8
grep -E -A7 "where a sync step" "$work/sd-log.txt" | cut -c1-190 | head -40
grep -E "^\s+\[|idle|torch loaded|^== showdown" "$work/sd-log.txt" | tail -60
grep -E -A12 "what the critical path lost" "$work/sd-log.txt" | cut -c1-170
for i in 1 2 3; do timeout 30 $build/bench/ringcast-bench hop --readers 1 > "$work/hop-$i.txt" 2>&1; echo "hop $i rc=$?"; tail -4 "$work/hop-$i.txt"; done
PYTHONPATH=$build/python timeout 40 python3 bench/python/bench_gil.py --runs 5 > "$work/gil.txt" 2>&1; echo "gil rc=$?"; tail -12 "$work/gil.txt"
