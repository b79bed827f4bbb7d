#!/bin/bash
# 2-core A/B: the tree at 4567dd1 (the 2026-12-03 21:44 batch's) against HEAD, alternated, showdown W=2 a c.
out=/work/main/.old/ab2core
for round in 1 2; do
  for side in old new; do
    if [ $side = old ]; then root=/tmp/wt-old; pp=/tmp/wt-old/tmp/b-old/python; else root=/work/main; pp=/work/main/build/python; fi
    (cd $root && PYTHONPATH=$pp /usr/bin/python3 bench/showdown/showdown.py --workers 2 --steps 600 --repeats 3 --variants ac --out $out/$side-$round > $out/$side-$round.log 2>&1)
    echo "$side-$round done $(date -u +%T)" >> $out/progress.txt
  done
done
