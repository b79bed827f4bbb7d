#!/usr/bin/env bash
# Wake-ahead A/B (HEAD with wake-ahead): showdown W=2, 8, variants a c f ((f) = (c) with wake_ahead=False), --trace, 5 runs.
# Packed into $OUT/ab3.tgz (the device returns at most 8 files).
set -uo pipefail
out=${OUT:-/tmp/out}; work=/tmp/ab3; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; git log -1 --format='%H %s' > "$work/build.txt" 2>/dev/null; tar czf "$out/ab3.tgz" -C "$work" . ; }
trap pack EXIT
export BUILD_DIR=/tmp/b-ab3
SHOWDOWN_ARGS="--variants acf --trace" WORKERS="2 8" REPEATS=5 STEPS=300 timeout 540 bash bench/showdown/device_showdown.sh "$work/sd" > "$work/sd-log.txt" 2>&1
echo "showdown rc=$?"; grep -E "^\(|targets|\[|idle" "$work/sd-log.txt" | grep -v "^  run" | tail -70
rm -f "$work/sd/showdown.tgz"
