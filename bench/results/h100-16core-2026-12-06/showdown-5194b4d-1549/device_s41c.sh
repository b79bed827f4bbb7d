#!/usr/bin/env bash
# The showdown after the later waits' verdict change (build.txt: the working tree, clean): W=8 and W=2, variants a c,
# 5 interleaved runs of 300 steps, torch loaded, pinned, the strategy table first; then W=16 (17 processes
# on 16 CPUs, unpinned), 5 runs; the core hop (3 runs), the GIL stretch (5 x 1 s) and the idle control (a
# Python+torch process that only sleeps, with and without a queue open: 20 readings each).
set -uo pipefail
out=${OUT:-/tmp/out}; work=/tmp/s41c; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/s41c.tgz" -C "$work" . ; }
trap pack EXIT
build=/tmp/b-s41c
date -u > "$work/start.txt"; cp .dev41/build-rev.txt "$work/build.txt"; cp "$0" .dev41/idle_exec.py "$work/"; git status --short > "$work/tree-status.txt" 2>&1
SHOWDOWN_ARGS="--variants ac --import-torch" WORKERS="8 2" REPEATS=5 STEPS=300 BUILD_DIR=$build timeout 330 bash bench/showdown/device_showdown.sh "$work/sd" > "$work/sd-log.txt" 2>&1
echo "showdown rc=$? $(date -u +%T)"
grep -E "x atomic|hybrid " "$work/sd/strategies.txt" | head -8
grep -E "^\s+\[|idle|^== showdown" "$work/sd-log.txt" | tail -40
for i in 1 2 3; do timeout 30 $build/bench/ringcast-bench hop --readers 1 > "$work/hop-$i.txt" 2>&1; echo "hop $i rc=$?"; tail -3 "$work/hop-$i.txt"; done
PYTHONPATH=$build/python timeout 40 python3 bench/python/bench_gil.py --runs 5 > "$work/gil.txt" 2>&1; echo "gil rc=$?"; tail -6 "$work/gil.txt"
for m in plain ringcast; do PYTHONPATH=$build/python timeout 40 python3 .dev41/idle_exec.py $m 20 > "$work/idle-$m.txt" 2>&1; echo "idle $m rc=$?"; tail -1 "$work/idle-$m.txt"; done
echo "w16 start $(date -u +%T)"
SHOWDOWN_ARGS="--variants ac --import-torch" WORKERS="16" REPEATS=5 STEPS=300 BUILD_DIR=$build timeout 200 bash bench/showdown/device_showdown.sh "$work/sd16" > "$work/sd16-log.txt" 2>&1
echo "showdown w16 rc=$? $(date -u +%T)"
grep -E "^\s+\[|idle|^== showdown" "$work/sd16-log.txt" | tail -20
echo "end $(date -u +%T)"
