#!/usr/bin/env bash
# The GIL stretch (bench_gil.py: two reader threads of a writer process that sends every 1 ms, 5 runs of
# 1 s) with dequeue_many's shorter path for a burst of one message (arm new = this tree, build.txt)
# against the Python package before it (arm old = the same build with ringcast/_queue.py as at 5194b4d
# and no _burst.py: the only files the change touched), alternated over the rounds; each round also
# the two floors: threads that sleep 1 ms and unpickle the same messages, and threads blocked in
# os.read on a pipe each that one writer process feeds (both woken by one message, no ringcast).
set -uo pipefail
rounds=${ROUNDS:-4}; tag=${TAG:-s41d}
out=${OUT:-/tmp/out}; work=/tmp/$tag; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/$tag.tgz" -C "$work" . ; }
trap pack EXIT
date -u > "$work/start.txt"; cp .dev41/build-rev.txt "$work/build.txt"; cp "$0" "$work/"
lscpu | grep -E "^Model:" | tee "$work/machine.txt"
b=/tmp/b-s41d
cmake -S . -B $b -DRINGCAST_BUILD_TESTS=OFF -DRINGCAST_BENCH_ZMQ=OFF -DPython_EXECUTABLE="$(command -v python3)" \
  -Dpybind11_DIR="$(python3 -m pybind11 --cmakedir)" > /tmp/$tag-configure.log 2>&1 && cmake --build $b -j16 --target ringcast_python_core > /tmp/$tag-build.log 2>&1 || { tail -30 /tmp/$tag-build.log; exit 1; }
rm -rf /tmp/py-old && cp -r $b/python /tmp/py-old && rm /tmp/py-old/ringcast/_burst.py && cp .dev41/_queue.py.5194b4d /tmp/py-old/ringcast/_queue.py
grep -q _loads_one_of_a_burst $b/python/ringcast/_burst.py && ! grep -q _loads_one_of_a_burst /tmp/py-old/ringcast/_queue.py && echo "arms checked $(date -u +%T)"
for r in $(seq 1 $rounds); do
  if (( r % 2 )); then order="old new"; else order="new old"; fi
  for arm in $order; do
    if [ $arm = old ]; then pp=/tmp/py-old; sc=paced; else pp=$b/python; sc=paced,sleepwork,pipes; fi
    PYTHONPATH=$pp timeout 60 python3 bench/python/bench_gil.py --runs 5 --scenarios $sc > "$work/gil-r$r-$arm.txt" 2>&1
    echo "r$r $arm rc=$? $(date -u +%T) $(grep -E '^\| T=' "$work/gil-r$r-$arm.txt" | awk -F'|' '{print $3 $5}' | tr '\n' ' ')"
  done
done
echo "end $(date -u +%T)"
