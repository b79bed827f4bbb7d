#!/usr/bin/env bash
# 2-core VM: the standard showdown (torch loaded, W=2, 600 steps x 5 runs, a and c), three batches, steps dumped.
cd /work/main
for i in 1 2 3; do
  d=.dev53/local-torch-$i; mkdir -p $d
  date -u +%T > $d/start.txt
  PYTHONPATH=build/python /usr/bin/python3 bench/showdown/showdown.py --workers 2 --steps 600 --repeats 5 --variants ac --import-torch --dump-steps --out $d > $d.txt 2>&1
  date -u +%T > $d/end.txt
done
