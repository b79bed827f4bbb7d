#!/bin/bash
# A/B on the 2-core VM: o = f5588e8 (the one-call paths), n = o + rule (iv): the gather collector hands its CPU over at its first step where its last timed yield was late, and a late hand-over counts as CPU given away (the next checkpoint may end the spin); alternated per round.
cd /work/main
for i in 1 2 3 4 5 6 7 8; do
  if [ $((i % 2)) = 1 ]; then order="o n"; else order="n o"; fi
  for v in $order; do
    if [ $v = o ]; then pp=build/python; else pp=/tmp/wt4build/python; fi
    echo "== round $i $v $(date +%T)"
    PYTHONPATH=$pp /usr/bin/python3 bench/showdown/showdown.py --workers 2 --steps 600 --repeats 1 --variants ac --out /tmp/ab6/r$i$v > /tmp/ab6/r$i$v.txt 2>&1
    grep -E "^\((a|c)\) .*(sync|async) " /tmp/ab6/r$i$v.txt | awk '{print "   ", $0}' | cut -c1-140
  done
done
