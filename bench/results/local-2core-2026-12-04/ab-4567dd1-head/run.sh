#!/bin/bash
# 2-core A/B as it ran (paths made generic): OLD = a checkout of 4567dd1 built in $OLD/build-old,
# NEW = this repository built in $NEW/build; each side's own showdown.py, W=2, variants a c, alternated.
out=${OUT:-ab2core}
for round in 1 2; do
  for side in old new; do
    if [ $side = old ]; then root=$OLD; pp=$OLD/build-old/python; else root=$NEW; pp=$NEW/build/python; fi
    (cd $root && PYTHONPATH=$pp python3 bench/showdown/showdown.py --workers 2 --steps 600 --repeats 3 --variants ac --out $out/$side-$round > $out/$side-$round.log 2>&1)
    echo "$side-$round done $(date -u +%T)" >> $out/progress.txt
  done
done
