#!/usr/bin/env bash
# 2-core VM: the library before the later waits' verdict (54930cd, arm "old") against after it (5194b4d + 0f381a7, arm "new"),
# alternated batches of the showdown (W=2, 600 steps x 5 runs, variants a c, torch loaded).
set -uo pipefail
out=${1:-.dev41/local-ab}; mkdir -p "$out"
i=0
for arm in ${ORDER:-old new new old old new}; do
  i=$((i+1)); d="$out/$i-$arm"; mkdir -p "$d"
  if [ $arm = old ]; then pp=/tmp/build-old/python; else pp=build/python; fi
  PYTHONPATH=$pp /usr/bin/python3 bench/showdown/showdown.py --workers 2 --steps 600 --repeats 5 --variants ac \
    --import-torch --out "$d" > "$d/showdown.txt" 2>&1
  echo "batch $i $arm rc=$? $(date -u +%T)"
done
