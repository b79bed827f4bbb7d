#!/usr/bin/env bash
# Call C of 2026-12-05 (packed into $OUT/s29c.tgz): the showdown at HEAD with torch loaded in every process
# (--import-torch), W=16 (17 processes on 16 CPUs, not pinned), variants a c, 7 interleaved runs of 300 steps (more runs than before:
# steadier medians), the strategy table first.
set -uo pipefail
out=${OUT:-/tmp/out}; work=/tmp/s29c; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; rm -f "$work/sd/showdown.tgz"; tar czf "$out/s29c.tgz" -C "$work" . ; }
trap pack EXIT
build=/tmp/b-s29c
date -u > "$work/start.txt"; cp .dev29/build-rev.txt "$work/build.txt"; cp "$0" "$work/"
SHOWDOWN_ARGS="--variants ac --import-torch" WORKERS="16" REPEATS=7 STEPS=300 BUILD_DIR=$build timeout 400 bash bench/showdown/device_showdown.sh "$work/sd" > "$work/sd-log.txt" 2>&1
echo "showdown rc=$? $(date -u +%T)"
grep -E "x atomic|hybrid " "$work/sd/strategies.txt" | head -8
grep -E -A7 "where a sync step" "$work/sd-log.txt" | cut -c1-190 | head -40
grep -E "^\s+\[|idle|torch loaded|^== showdown" "$work/sd-log.txt" | tail -60
grep -E -A12 "what the critical path lost" "$work/sd-log.txt" | cut -c1-170
