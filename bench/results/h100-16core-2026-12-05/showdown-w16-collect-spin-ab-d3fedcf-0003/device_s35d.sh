#!/usr/bin/env bash
# Call D (packed into $OUT/s35d.tgz): does the collect's spin through the step cost the all-rank step where
# the workers fill every CPU? The showdown at W=16 (17 processes on 16 CPUs, not pinned), variants a c g d,
# (g) = (c) with the collect's adaptive spin off (--g-spin-max-us 0: spin 10 us, then sleep; the workers'
# waits as (c)), (d) = both off; 5 interleaved runs of 300 steps, torch loaded, build of build-rev.txt.
set -uo pipefail
out=${OUT:-/tmp/out}; work=/tmp/s35d; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/s35d.tgz" -C "$work" . ; }
trap pack EXIT
build=/tmp/b-s35
date -u > "$work/start.txt"; cp .dev35/build-rev.txt "$work/build.txt"; cp "$0" "$work/"
SHOWDOWN_ARGS="--variants acgd --g-spin-max-us 0 --import-torch" WORKERS="16" REPEATS=5 STEPS=300 BUILD_DIR=$build timeout 560 bash bench/showdown/device_showdown.sh "$work/sd16" > "$work/sd16-log.txt" 2>&1
echo "showdown w16 rc=$? $(date -u +%T)"
grep -A14 "^executor showdown — 16" "$work/sd16-log.txt"
grep -A12 "^where a sync step" "$work/sd16-log.txt"
grep -E "^\s+\[|idle" "$work/sd16-log.txt" | tail -20
echo "end $(date -u +%T)"
