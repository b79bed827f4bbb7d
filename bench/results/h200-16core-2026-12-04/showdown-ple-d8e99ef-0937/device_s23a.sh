#!/usr/bin/env bash
# Call A (packed into $OUT/s23a.tgz): the PLE probe (pause-loop exiting: does a pause spin lose its vCPU?)
# on CPUs 2/3 and 4/9, then the showdown at HEAD with torch loaded in every process (--import-torch),
# W=2 and 8, variants a c, 5 interleaved runs of 300 steps; the strategy table first.
set -uo pipefail
out=${OUT:-/tmp/out}; work=/tmp/s23a; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; rm -f "$work/sd/showdown.tgz"; tar czf "$out/s23a.tgz" -C "$work" . ; }
trap pack EXIT
build=/tmp/b-s23a
date -u > "$work/start.txt"; cp .old/build-rev.txt "$work/build.txt"; cp "$0" .old/ple_probe.cpp "$work/"
g++ -O2 -std=c++20 .old/ple_probe.cpp -o /tmp/ple_probe && {
  for pair in "2 3" "4 9"; do set -- $pair; timeout 60 /tmp/ple_probe $1 $2 > "$work/ple-cpu$1-$2.txt" 2>&1; done
  echo "ple done $(date -u +%T)"; cat "$work/ple-cpu2-3.txt"; }
SHOWDOWN_ARGS="--variants ac --import-torch" WORKERS="2 8" REPEATS=5 STEPS=300 BUILD_DIR=$build timeout 480 bash bench/showdown/device_showdown.sh "$work/sd" > "$work/sd-log.txt" 2>&1
echo "showdown rc=$? $(date -u +%T)"
grep -E "x atomic|hybrid " "$work/sd/strategies.txt" | head -8
grep -E -A7 "where a sync step" "$work/sd-log.txt" | cut -c1-190 | head -40
grep -E "^\s+\[|idle|torch loaded|^== showdown" "$work/sd-log.txt" | tail -45
