#!/usr/bin/env bash
# The 2-core VM at HEAD: bench/showdown/showdown.py --workers 2 --steps 600 --repeats 5 --variants ac
# --import-torch, three batches back to back (not pinned: too few CPUs).
set -uo pipefail
out=${1:-/tmp/l39}; mkdir -p "$out"
for b in 1 2 3; do
  mkdir -p "$out/b$b"
  date -u +%T > "$out/b$b/start.txt"
  PYTHONPATH=build/python /usr/bin/python3 bench/showdown/showdown.py --workers 2 --steps 600 --repeats 5 --variants ac \
    --import-torch --out "$out/b$b" > "$out/b$b/showdown.txt" 2>&1
  echo "batch $b rc=$? $(date -u +%T)"
done
