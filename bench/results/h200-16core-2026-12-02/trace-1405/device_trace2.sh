#!/usr/bin/env bash
# The final build (a5f3bef + a test-only commit), traced: where a sync step's overhead goes, (a) against
# (c) and (e) (a pure spin), pickling timed inside every part (--trace). One device call; packed into
# $OUT/trace.tgz.
set -uo pipefail
out=${OUT:-/tmp/out}; work=/tmp/trace; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/trace.tgz" -C "$work" . ; }
trap pack EXIT
export BUILD_DIR=/tmp/b-trace
SHOWDOWN_ARGS="--variants ace --trace" WORKERS="2 8" timeout 560 bash bench/showdown/device_showdown.sh "$work/sd" > "$work/sd-log.txt" 2>&1
echo "showdown rc=$?"
rm -f "$work/sd/showdown.tgz"
grep -E "targets|\[sync|\[async|idle" "$work/sd-log.txt" | tail -30
grep -A9 "pickling taken out" "$work/sd-log.txt"
