#!/usr/bin/env bash
# A/B on the 16-core machine (2026-12-06): a gather collect's later waits yield before their first spin
# step only where the replies' spread is long (arm new = this tree, build.txt / change.diff) against
# the library of 54930cd, where they yield after every first reply (arm old = this tree with
# include/ringcast/wait.hpp and src/gather.cpp as at 54930cd, the only library files the change
# touched). showdown.py, variant c only, 1 run of 300 steps per invocation, torch loaded, W as given,
# arms alternated over the rounds. Then bench_gil.py (new build): paced, sleepwork, pipes; 3 rounds.
set -uo pipefail
ws=${WS:-"8 2"}; rounds=${ROUNDS:-5}; tag=${TAG:-s41a}; gil=${GIL:-3}
out=${OUT:-/tmp/out}; work=/tmp/$tag; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/$tag.tgz" -C "$work" . ; }
trap pack EXIT
date -u > "$work/start.txt"; cp .dev41/build-rev.txt "$work/build.txt"; cp .dev41/change.diff "$work/"; cp "$0" "$work/"
lscpu | grep -E "^Model:" | tee "$work/machine.txt"
new=/tmp/b-s41new; old=/tmp/b-s41old
if [ ! -e $old/python/ringcast/_core*.so ]; then
rm -rf /tmp/old-tree && mkdir /tmp/old-tree && tar cf - --exclude=./.dev41 --exclude=./.dev40 --exclude=./build . | tar xf - -C /tmp/old-tree
cp .dev41/wait.hpp.54930cd /tmp/old-tree/include/ringcast/wait.hpp; cp .dev41/gather.cpp.54930cd /tmp/old-tree/src/gather.cpp
for b in "$new:." "$old:/tmp/old-tree"; do d=${b%%:*}; s=${b#*:}
  cmake -S $s -B $d -DRINGCAST_BUILD_TESTS=OFF -DRINGCAST_BENCH_ZMQ=OFF -DPython_EXECUTABLE="$(command -v python3)" \
    -Dpybind11_DIR="$(python3 -m pybind11 --cmakedir)" > /tmp/$tag-configure.log 2>&1 && cmake --build $d -j16 --target ringcast_python_core > /tmp/$tag-build.log 2>&1 || { tail -30 /tmp/$tag-build.log; exit 1; }
done
else echo "builds reused"; fi
grep -q later_long_ /tmp/old-tree/include/ringcast/wait.hpp && { echo "old arm has the change"; exit 1; }
grep -q later_long_ include/ringcast/wait.hpp && echo "arms checked $(date -u +%T)"
for w in $ws; do
  for r in $(seq 1 $rounds); do
    if (( r % 2 )); then order="old new"; else order="new old"; fi
    for arm in $order; do
      if [ $arm = old ]; then pp=$old/python; else pp=$new/python; fi
      PYTHONPATH=$pp timeout 120 python3 bench/showdown/showdown.py --workers $w --steps 300 --repeats 1 \
        --variants c --import-torch --out "$work/w$w-r$r-$arm" > "$work/w$w-r$r-$arm.txt" 2>&1
      echo "w$w r$r $arm rc=$? $(date -u +%T) $(grep -E '^\(c\).* (sync|async) ' "$work/w$w-r$r-$arm.txt" | head -4 | awk '{print $5"/"$6":"$9}' | tr '\n' ' ')"
    done
  done
done
for g in $(seq 1 $gil); do
  PYTHONPATH=$new/python timeout 150 python3 bench/python/bench_gil.py --runs 5 --scenarios paced,sleepwork,pipes > "$work/gil-$g.txt" 2>&1
  echo "gil $g rc=$? $(date -u +%T)"; grep -E "^\| T=" "$work/gil-$g.txt" | awk -F'|' '{print $3}' | tr '\n' ' '; echo
done
echo "end $(date -u +%T)"
