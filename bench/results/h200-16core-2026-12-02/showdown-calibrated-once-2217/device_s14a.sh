#!/usr/bin/env bash
# Session 14, call A (packed into $OUT/s14a.tgz): showdown W=2, 8, variants a c d, 5 interleaved runs,
# with the full-speed view (the VM's Python speed episodes).
set -uo pipefail
out=${OUT:-/tmp/out}; work=/tmp/s14a; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/s14a.tgz" -C "$work" . ; }
trap pack EXIT
export BUILD_DIR=/tmp/b-s14
date -u > "$work/start.txt"; cp .old/build-rev.txt "$work/build.txt"
SHOWDOWN_ARGS="--variants acd" WORKERS="2 8" REPEATS=5 STEPS=300 timeout 560 bash bench/showdown/device_showdown.sh "$work/sd" > "$work/sd-log.txt" 2>&1
echo "showdown rc=$? $(date -u +%T)"
grep -E "targets|\[|full speed|% of steps|fastest tenth|^executor showdown" "$work/sd-log.txt" | tail -70
rm -f "$work/sd/showdown.tgz"
