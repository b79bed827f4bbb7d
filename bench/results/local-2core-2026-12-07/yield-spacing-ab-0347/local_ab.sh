#!/usr/bin/env bash
# 2-core VM A/B of YieldSpacing: base (HEAD's package, built apart) vs cand (build/), the showdown
# W=2 (--pin auto: off on 2 CPUs, which it needs 4 for), 600 steps x 3 runs, a c, torch; alternated base, cand, base, cand.
out=${1:-/tmp/ab46}; mkdir -p "$out"
for r in base-1 cand-1 base-2 cand-2; do
  case $r in base*) pp=/tmp/base-build/python ;; *) pp=build/python ;; esac
  PYTHONPATH=$pp /usr/bin/python3 bench/showdown/showdown.py --workers 2 --steps 600 --repeats 3 --variants ac --import-torch \
    --out "$out/sd-$r" > "$out/sd-$r.txt" 2>&1; echo "$r rc=$? $(date -u +%T)"
done
