#!/usr/bin/env bash
# Call C (packed into $OUT/s35c.tgz), the machine of calls A and B: the showdown at W=16 (17 processes on
# 16 CPUs, not pinned), variants a c, 5 interleaved runs of 300 steps, torch loaded (call A's build); then
# the core hop again (3 runs).
set -uo pipefail
out=${OUT:-/tmp/out}; work=/tmp/s35c; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/s35c.tgz" -C "$work" . ; }
trap pack EXIT
build=/tmp/b-s35
date -u > "$work/start.txt"; cp .dev35/build-rev.txt "$work/build.txt"; cp "$0" "$work/"
SHOWDOWN_ARGS="--variants ac --import-torch" WORKERS="16" REPEATS=5 STEPS=300 BUILD_DIR=$build timeout 330 bash bench/showdown/device_showdown.sh "$work/sd16" > "$work/sd16-log.txt" 2>&1
echo "showdown w16 rc=$? $(date -u +%T)"
grep -E "^\s+\[|idle|^== showdown" "$work/sd16-log.txt" | tail -20
for i in 1 2 3; do timeout 30 $build/bench/ringcast-bench hop --readers 1 > "$work/hop-$i.txt" 2>&1; echo "hop $i rc=$?"; tail -3 "$work/hop-$i.txt"; done
echo "end $(date -u +%T)"
