#!/usr/bin/env bash
# On the warm machine of s45a (its build in /tmp/b-s45): W=16 (17 processes on 16 CPUs, unpinned), variants
# a c, 5 interleaved runs of 300 steps, torch loaded; the GIL stretch first, with a longer limit (s45a's hit 40 s).
set -uo pipefail
tag=${TAG:-s45b}
out=${OUT:-/tmp/out}; work=/tmp/$tag; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/$tag.tgz" -C "$work" . ; }
trap pack EXIT
build=/tmp/b-s45
date -u > "$work/start.txt"; cp .dev45/build-rev.txt "$work/build.txt"; cp "$0" "$work/"
lscpu | grep -E "^Model:|^Model name" | tee "$work/machine.txt"
ls $build/python/ringcast/_core*.so $build/bench/ringcast-bench || exit 1
PYTHONPATH=$build/python timeout 75 python3 bench/python/bench_gil.py --runs 5 > "$work/gil.txt" 2>&1; echo "gil rc=$? $(date -u +%T)"; tail -8 "$work/gil.txt"; pack
SHOWDOWN_ARGS="--variants ac --import-torch" WORKERS="16" REPEATS=5 STEPS=300 BUILD_DIR=$build timeout 220 bash bench/showdown/device_showdown.sh "$work/sd16" > "$work/sd16-log.txt" 2>&1
echo "showdown w16 rc=$? $(date -u +%T)"; pack
grep -E "^\s+\[|idle|^== showdown" "$work/sd16-log.txt" | tail -20
echo "end $(date -u +%T)"
