#!/usr/bin/env bash
# Call A of 2026-12-05 (session 34) (packed into $OUT/s34a.tgz): the showdown at build-rev.txt's commit
# build with torch loaded, W=8, variants a c e (e: ringcast with wait="spin" everywhere), 7 interleaved
# runs of 300 steps, pinned, the strategy table first: the request's arrival at each worker (by rank and
# by order) in an all-rank sync step, for the spinner, ringcast's defaults and a pure spin.
set -uo pipefail
# Built from .dev34/head.tgz (git archive of the commit in build-rev.txt), not the working tree around it.
src=/tmp/src-s34; if [ ! -d $src ]; then mkdir -p $src && tar xzf .dev34/head.tgz -C $src; fi; mkdir -p $src/.dev34; cp .dev34/*.txt .dev34/*.sh $src/.dev34/; cd $src
out=${OUT:-/tmp/out}; work=/tmp/s34a; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/s34a.tgz" -C "$work" . ; }
trap pack EXIT
build=/tmp/b-s34
date -u > "$work/start.txt"; cp .dev34/build-rev.txt "$work/build.txt"; cp "$0" "$work/"
SHOWDOWN_ARGS="--variants ace --import-torch" WORKERS="8" REPEATS=7 STEPS=300 BUILD_DIR=$build timeout 540 bash bench/showdown/device_showdown.sh "$work/sd" > "$work/sd-log.txt" 2>&1
echo "showdown rc=$? $(date -u +%T)"
grep -E "x atomic|hybrid " "$work/sd/strategies.txt" | head -8
grep -E "^\s+\[|idle|torch loaded|^== showdown" "$work/sd-log.txt" | tail -30
grep -A12 "when each worker" "$work/sd-log.txt"
echo "end $(date -u +%T)"
