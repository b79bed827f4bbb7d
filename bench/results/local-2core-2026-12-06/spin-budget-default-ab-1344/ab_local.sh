#!/usr/bin/env bash
# 2-core VM: the library before the spin-budget change (2a8e0d2, arm "old") against after it (arm "new"),
# alternated batches of the showdown (W=2, 600 steps x 5 runs, variants a c, torch loaded).
set -uo pipefail
out=${1:-.dev40/local-ab}; mkdir -p "$out"
i=0
for arm in ${ORDER:-old new new old old new}; do
  i=$((i+1)); d="$out/$i-$arm"; mkdir -p "$d"
  if [ $arm = old ]; then pp=/tmp/build-old/python; else pp=build/python; fi
  PYTHONPATH=$pp /usr/bin/python3 bench/showdown/showdown.py --workers 2 --steps 600 --repeats 5 --variants ac \
    --import-torch --out "$d" > "$d/showdown.txt" 2>&1
  echo "batch $i $arm rc=$? $(date -u +%T)"
done
