#!/usr/bin/env bash
# Call B (packed into $OUT/s21b.tgz): the showdown at HEAD with torch loaded, W=2 and 8,
# variants a c g; (g) = (c) with the workers' receive capped at 5 ms instead of 2 (the collect keeps
# its default 10 ms): does a longer reader cap end the slow state's async waits in a spin?
set -uo pipefail
out=${OUT:-/tmp/out}; work=/tmp/s21b; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; rm -f "$work/sd/showdown.tgz"; tar czf "$out/s21b.tgz" -C "$work" . ; }
trap pack EXIT
build=/tmp/b-s21b
date -u > "$work/start.txt"; cp .old/build-rev.txt "$work/build.txt"; cp "$0" "$work/"
SHOWDOWN_ARGS="--variants acg --g-spin-max-us 10000 --g-queue-spin-max-us 5000 --import-torch" WORKERS="2 8" REPEATS=5 STEPS=300 BUILD_DIR=$build timeout 540 bash bench/showdown/device_showdown.sh "$work/sd" > "$work/sd-log.txt" 2>&1
echo "showdown rc=$? $(date -u +%T)"
grep -E "^\s+\[|idle|^== showdown|overhead p50|\(a\)|\(c\)|\(g\)" "$work/sd-log.txt" | cut -c1-200 | tail -60
