#!/usr/bin/env bash
# 2-core VM A/B: the build before the near-cap prediction and the polite-spin rule (o = 080dfd0, its
# Python module built in /tmp/bo) and after (n = build/), showdown (a) and (c), W=2, 600 steps,
# alternated o, n, 3 rounds, one repetition each. Run from the repository root.
set -u
D=${1:-bench/results/local-2core-2026-12-01/polite-ab}
for i in 1 2 3; do for v in o n; do
  pp=build/python; [ $v = o ] && pp=/tmp/bo/python
  PYTHONPATH=$pp timeout 300 /usr/bin/python3 bench/showdown/showdown.py --workers 2 --steps 600 --repeats 1 \
    --variants ac --out /tmp/ab-$v-$i > $D/ab-$v-$i.txt 2>&1
  echo "== $v round $i $(date +%T)"; grep -E "^\((a|c)\)" $D/ab-$v-$i.txt | head -8 | cut -c1-48,95-200
done; done
