#!/usr/bin/env bash
# On the warm machine of s44c (its builds in /tmp/b-*): the W=8 showdown (a) vs (c) with v3, 5
# interleaved runs of 300 steps, torch, pinned, steps kept; then hop base v3 v3 base.
set -uo pipefail
tag=${TAG:-s44d}
out=${OUT:-/tmp/out}; work=/tmp/$tag; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/$tag.tgz" -C "$work" . ; }
trap pack EXIT
date -u > "$work/start.txt"; cp .dev44/build-rev.txt "$work/build.txt"; cp "$0" "$work/"
lscpu | grep -E "^Model:|^Model name" | tee "$work/machine.txt"
ls /tmp/b-v3/python/ringcast/_core*.so /tmp/b-base/bench/ringcast-bench || exit 1
mkdir -p "$work/torch-w8-v3"
PYTHONPATH=/tmp/b-v3/python timeout 260 python3 .dev44/v3/bench/showdown/showdown.py --workers 8 --steps 300 --repeats 5 \
  --variants ac --import-torch --dump-steps --out "$work/torch-w8-v3" > "$work/torch-w8-v3.txt" 2>&1
echo "showdown rc=$? $(date -u +%T)"; rm -f "$work/torch-w8-v3/showdown.png"; pack
i=0
for arm in ${ARMS:-base v3 v3 base}; do
  i=$((i+1)); timeout 60 /tmp/b-$arm/bench/ringcast-bench hop --readers 1 --json "$work/hop-$i-$arm.json" > "$work/hop-$i-$arm.txt" 2>&1
  echo "hop $i $arm rc=$? $(date -u +%T) $(grep -E '^hybrid RTT' "$work/hop-$i-$arm.txt" | sed -E 's/.*rounds: ([0-9.]+).*/\1/' | tr '\n' ' ')"
  pack
done
echo "end $(date -u +%T)"
