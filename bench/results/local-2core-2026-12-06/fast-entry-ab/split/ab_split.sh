#!/bin/bash
# alternated A/B of bench_step_split: A = the Python layer calling pybind11's methods, B = the FastEntry callables
cd /work/main
for round in 1 2 3; do
  for arm in A B; do
    [ $round = 2 ] && arm=$([ $arm = A ] && echo B || echo A)
    for w in 1 2; do
      echo "== round $round arm $arm W=$w"
      PYTHONPATH=/tmp/py$arm:bench/python /usr/bin/python3 bench/python/bench_step_split.py --workers $w --runs 3 --steps 2000 | tail -17
    done
  done
done
