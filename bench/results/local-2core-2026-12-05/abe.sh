#!/bin/bash
# usage: abe.sh OUTDIR label:PYTHONPATH[:ENVVAR=VAL] ...   (ROUNDS env, default 2; same showdown.py for all)
out=$1; shift
mkdir -p $out
for r in $(seq 1 ${ROUNDS:-2}); do
  for spec in "$@"; do
    IFS=: read -r label pp envkv <<< "$spec"
    env ${envkv} PYTHONPATH=$pp /usr/bin/python3 bench/showdown/showdown.py --workers 2 --steps 600 --repeats 3 --variants ac ${SHOWARGS} --out $out/$label-$r > $out/$label-$r.txt 2>&1
    echo "$label-$r done $(date +%T)"
  done
done
