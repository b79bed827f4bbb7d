#!/usr/bin/env bash
# Call C (packed into $OUT/s21c.tgz): the showdown at HEAD with torch loaded in every process
# (--import-torch), W=2, 8 and 16, variants a c, 5 interleaved runs of 300 steps; the strategy table first.
set -uo pipefail
out=${OUT:-/tmp/out}; work=/tmp/s21c; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; rm -f "$work/sd/showdown.tgz"; tar czf "$out/s21c.tgz" -C "$work" . ; }
trap pack EXIT
build=/tmp/b-s21c
date -u > "$work/start.txt"; cp .old/build-rev.txt "$work/build.txt"; cp "$0" "$work/"
SHOWDOWN_ARGS="--variants ac --import-torch" WORKERS="2 8 16" REPEATS=5 STEPS=300 BUILD_DIR=$build timeout 520 bash bench/showdown/device_showdown.sh "$work/sd" > "$work/sd-log.txt" 2>&1
echo "showdown rc=$? $(date -u +%T)"
grep -E "x atomic|hybrid " "$work/sd/strategies.txt" | head -8
grep -E -A7 "where a sync step" "$work/sd-log.txt" | cut -c1-190 | head -40
grep -E "^\s+\[|idle|torch loaded|^== showdown" "$work/sd-log.txt" | tail -45
