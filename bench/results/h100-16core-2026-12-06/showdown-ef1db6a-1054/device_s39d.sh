#!/usr/bin/env bash
# Call D of 2026-12-06 (session 39), a second machine for the library of ef1db6a (build-rev.txt: later commits changed documents only): the showdown
# W=8 and W=2, variants a c, 5 interleaved runs of 300 steps, torch loaded, pinned, the strategy table first;
# then the core hop (3 runs). (No GIL or idle control: the device time left.)
set -uo pipefail
out=${OUT:-/tmp/out}; work=/tmp/s39d; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/s39d.tgz" -C "$work" . ; }
trap pack EXIT
build=/tmp/b-s39d
date -u > "$work/start.txt"; cp .dev39/build-rev.txt "$work/build.txt"; cp "$0" "$work/"
SHOWDOWN_ARGS="--variants ac --import-torch" WORKERS="8 2" REPEATS=5 STEPS=300 BUILD_DIR=$build timeout 430 bash bench/showdown/device_showdown.sh "$work/sd" > "$work/sd-log.txt" 2>&1
echo "showdown rc=$? $(date -u +%T)"
grep -E "x atomic|hybrid " "$work/sd/strategies.txt" | head -8
grep -E "^\s+\[|idle|^== showdown" "$work/sd-log.txt" | tail -40
for i in 1 2 3; do timeout 30 $build/bench/ringcast-bench hop --readers 1 > "$work/hop-$i.txt" 2>&1; echo "hop $i rc=$?"; tail -3 "$work/hop-$i.txt"; done
lscpu | grep -E "^Model:"
echo "end $(date -u +%T)"
