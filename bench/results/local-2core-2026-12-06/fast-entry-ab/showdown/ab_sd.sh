#!/bin/bash
# alternated A/B of the 2-core showdown: A = the Python layer calling pybind11's methods, B = the FastEntry callables
cd /work/main
for arm in A B B A A B; do
  n=$((n+1)); out=/tmp/absd/$n-$arm; mkdir -p $out
  PYTHONPATH=/tmp/py$arm /usr/bin/python3 bench/showdown/showdown.py --workers 2 --steps 600 --repeats 5 --variants ac --import-torch --out $out > $out/showdown.txt 2>&1
  echo "$n $arm $(date +%T) $(grep -E '^\((a|c)\) ' $out/showdown.txt | head -8 | awk '{printf "%s%s ", substr($1,2,1), $(NF-9)}')"
done
