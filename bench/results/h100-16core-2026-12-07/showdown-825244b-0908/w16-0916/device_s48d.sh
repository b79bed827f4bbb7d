#!/usr/bin/env bash
# Build 825244b (build.txt) on a fresh machine: W=16 (17 processes on 16 CPUs, unpinned), variants a c,
# 5 interleaved runs of 300 steps, torch loaded, through device_showdown.sh (its strategy table and
# probes first); then the GIL stretch once more.
set -uo pipefail
tag=${TAG:-s48d}
out=${OUT:-/tmp/out}; work=/tmp/$tag; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/$tag.tgz" -C "$work" . ; }
trap pack EXIT
build=/tmp/b-s48
date -u > "$work/start.txt"; cp .dev48/build-rev.txt "$work/build.txt"; cp "$0" "$work/"
lscpu | grep -E "^Model:|^Model name" | tee "$work/machine.txt"
SHOWDOWN_ARGS="--variants ac --import-torch" WORKERS="16" REPEATS=5 STEPS=300 BUILD_DIR=$build timeout 420 bash bench/showdown/device_showdown.sh "$work/sd16" > "$work/sd16-log.txt" 2>&1
echo "showdown w16 rc=$? $(date -u +%T)"; pack
grep -E "^\s+\[|idle|^== showdown|^\((a|c)\)" "$work/sd16-log.txt" | tail -30
PYTHONPATH=$build/python timeout 75 python3 bench/python/bench_gil.py --runs 5 > "$work/gil.txt" 2>&1; echo "gil rc=$? $(date -u +%T)"; tail -8 "$work/gil.txt"; pack
echo "end $(date -u +%T)"
