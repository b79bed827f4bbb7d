#!/usr/bin/env bash
# Experiment: the executor's collect never gives its spin up (GivenAwayCpu off) vs the defaults,
# alternated batches on the 2-core VM.
set -uo pipefail
out=${1:-.dev39/keep}; mkdir -p "$out"
i=0
for m in ${ORDER:-0 1 1 0 0 1}; do
  i=$((i+1)); d="$out/$i-m$m"; mkdir -p "$d"
  RINGCAST_EXP_KEEP_SPIN=$m PYTHONPATH=build/python /usr/bin/python3 bench/showdown/showdown.py --workers 2 --steps 600 --repeats 5 --variants ac \
    --import-torch --out "$d" > "$d/showdown.txt" 2>&1
  echo "batch $i mode $m rc=$? $(date -u +%T)"
done
