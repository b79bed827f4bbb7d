#!/usr/bin/env bash
# The same build (warm machine of s53a): the showdown at W=16 (17 processes on 16 CPUs, not pinned), variants a c,
# 3 interleaved runs; then the core hop three times.
set -uo pipefail
tag=${TAG:-s53b}
out=${OUT:-/tmp/out}; work=/tmp/$tag; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/$tag.tgz" -C "$work" . ; }
trap pack EXIT
build=/tmp/b-s53; t0=$SECONDS
date -u > "$work/start.txt"; cp .dev53/build-rev.txt "$work/build.txt"; cp "$0" "$work/"
lscpu | grep -E "^Model:" | tee "$work/machine.txt"
[ -x $build/bench/ringcast-bench ] && echo "build kept" || { echo "no build"; exit 1; }
PYTHONPATH=$build/python timeout 230 python3 bench/showdown/showdown.py --workers 16 --steps 300 --repeats 3 --variants ac --import-torch --dump-steps --out "$work/w16" > "$work/showdown-w16.txt" 2>&1
echo "w16 rc=$? $(date -u +%T) ($((SECONDS - t0)) s)"; pack
grep -E "^\((a|c)\) .* (sync|async) +[0-9]|^python floor|^  \[" "$work/showdown-w16.txt" | head -30
for i in 1 2 3; do
  (( SECONDS - t0 < 380 )) || break
  timeout 50 $build/bench/ringcast-bench hop --readers 1 --json "$work/hop-$i.json" > "$work/hop-$i.txt" 2>&1
  echo "hop $i rc=$? $(date -u +%T)"; grep -iE "hybrid|floor_atomic|ratio|/ floor" "$work/hop-$i.txt" | head -8; pack
done
echo "end $(date -u +%T) ($((SECONDS - t0)) s)"
