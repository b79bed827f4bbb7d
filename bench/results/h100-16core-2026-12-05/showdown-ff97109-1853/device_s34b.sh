#!/usr/bin/env bash
# Call B (packed into $OUT/s34b.tgz): the showdown W=2, variants a c, 7 interleaved runs of 300 steps,
# torch loaded, pinned (the build of call A, rebuilt if the machine is fresh); then the core hop (3 runs of
# 7 alternated rounds) and the GIL stretch (5 x 1 s).
set -uo pipefail
# Built from .dev34/head.tgz (git archive of the commit in build-rev.txt), not the working tree around it.
src=/tmp/src-s34; if [ ! -d $src ]; then mkdir -p $src && tar xzf .dev34/head.tgz -C $src; fi; mkdir -p $src/.dev34; cp .dev34/*.txt .dev34/*.sh $src/.dev34/; cd $src
out=${OUT:-/tmp/out}; work=/tmp/s34b; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/s34b.tgz" -C "$work" . ; }
trap pack EXIT
build=/tmp/b-s34
date -u > "$work/start.txt"; cp .dev34/build-rev.txt "$work/build.txt"; cp "$0" "$work/"
SHOWDOWN_ARGS="--variants ac --import-torch" WORKERS="2" REPEATS=7 STEPS=300 BUILD_DIR=$build timeout 420 bash bench/showdown/device_showdown.sh "$work/sd" > "$work/sd-log.txt" 2>&1
echo "showdown rc=$? $(date -u +%T)"
grep -E "^\s+\[|idle|torch loaded|^== showdown" "$work/sd-log.txt" | tail -30
for i in 1 2 3; do timeout 30 $build/bench/ringcast-bench hop --readers 1 > "$work/hop-$i.txt" 2>&1; echo "hop $i rc=$?"; tail -3 "$work/hop-$i.txt"; done
PYTHONPATH=$build/python timeout 40 python3 bench/python/bench_gil.py --runs 5 > "$work/gil.txt" 2>&1; echo "gil rc=$?"; tail -6 "$work/gil.txt"
echo "end $(date -u +%T)"
