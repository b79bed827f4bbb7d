#!/usr/bin/env bash
# W=16 A/B on the 16-core machine: the library before the spin-budget change (arm old = this tree with
# include/ringcast/wait.hpp as at 2a8e0d2, the only library file the change touched) against after it
# (arm new = this tree, build.txt). showdown.py, variant c only, 1 run of 300 steps per invocation, torch
# loaded, W=16 (17 processes on 16 CPUs, unpinned), arms alternated over the rounds.
set -uo pipefail
rounds=${ROUNDS:-6}; tag=${TAG:-s40d}
out=${OUT:-/tmp/out}; work=/tmp/$tag; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/$tag.tgz" -C "$work" . ; }
trap pack EXIT
date -u > "$work/start.txt"; cp .dev40/build-rev.txt "$work/build.txt"; cp "$0" "$work/"; lscpu | grep -E "^Model:" | tee "$work/machine.txt"
new=/tmp/b-s40c; old=/tmp/b-s40old
rm -rf /tmp/old-tree && mkdir /tmp/old-tree && tar cf - --exclude=./.dev40 --exclude=./build . | tar xf - -C /tmp/old-tree && cp .dev40/wait.hpp.2a8e0d2 /tmp/old-tree/include/ringcast/wait.hpp
for b in "$new:." "$old:/tmp/old-tree"; do d=${b%%:*}; s=${b#*:}
  cmake -S $s -B $d -DRINGCAST_BUILD_TESTS=OFF -DRINGCAST_BENCH_ZMQ=OFF -DPython_EXECUTABLE="$(command -v python3)" \
    -Dpybind11_DIR="$(python3 -m pybind11 --cmakedir)" > /tmp/$tag-configure.log 2>&1 && cmake --build $d -j16 --target ringcast_python_core > /tmp/$tag-build.log 2>&1 || { tail -30 /tmp/$tag-build.log; exit 1; }
done
diff <(grep -c recent_longest /tmp/old-tree/include/ringcast/wait.hpp) <(echo 0) && grep -q recent_longest include/ringcast/wait.hpp && echo "arms checked $(date -u +%T)"
for r in $(seq 1 $rounds); do
  if (( r % 2 )); then order="old new"; else order="new old"; fi
  for arm in $order; do
    if [ $arm = old ]; then pp=$old/python; else pp=$new/python; fi
    PYTHONPATH=$pp timeout 120 python3 bench/showdown/showdown.py --workers 16 --steps 300 --repeats 1 \
      --variants c --import-torch --out "$work/w16-r$r-$arm" > "$work/w16-r$r-$arm.txt" 2>&1
    echo "w16 r$r $arm rc=$? $(date -u +%T) $(grep -E '^\(c\).* (sync|async) ' "$work/w16-r$r-$arm.txt" | head -4 | awk '{print $5"/"$6":"$9}' | tr '\n' ' ')"
  done
done
echo "end $(date -u +%T)"
