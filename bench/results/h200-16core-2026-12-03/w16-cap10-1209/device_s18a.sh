#!/usr/bin/env bash
# Session 18, call A (packed into $OUT/s18a.tgz): the showdown at W=16 (the report's setting) with the
# collect's 10 ms default cap, variants a c g (g: the old 2 ms cap), 5 interleaved runs of 300 steps
# (17 processes on 16 CPUs: not pinned); two more strategy tables; the core hop at 1 and 2 readers, pinned.
set -uo pipefail
out=${OUT:-/tmp/out}; work=/tmp/s18a; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/s18a.tgz" -C "$work" . ; }
trap pack EXIT
build=/tmp/b-s18a
date -u > "$work/start.txt"; cp .old/build-rev.txt "$work/build.txt"
SHOWDOWN_ARGS="--variants acg" WORKERS="16" REPEATS=5 STEPS=300 BUILD_DIR=$build timeout 400 bash bench/showdown/device_showdown.sh "$work/sd16" > "$work/sd16-log.txt" 2>&1
echo "w16 rc=$? $(date -u +%T)"
grep -E -A9 "where a sync step" "$work/sd16-log.txt" | cut -c1-190
grep -E "^\s+\[|idle|targets" "$work/sd16-log.txt" | tail -30
rm -f "$work/sd16/showdown.tgz"
for i in 2 3; do
  timeout 40 "$build/bench/ringcast-bench" strategies --readers 2 --json "$work/strategies-$i.json" > "$work/strategies-$i.txt" 2>&1
done
grep -iE "floor|adaptive|hybrid" "$work/sd16/strategies.txt" "$work/strategies-2.txt" "$work/strategies-3.txt" | head -24
for r in 1 2; do
  timeout 60 "$build/bench/ringcast-bench" hop --readers $r --rounds 5 --pin --json "$work/hop-r$r.json" > "$work/hop-r$r.txt" 2>&1
  echo "hop r=$r rc=$?"; tail -8 "$work/hop-r$r.txt"
done
echo "done $(date -u +%T)"
