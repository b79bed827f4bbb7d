#!/usr/bin/env bash
# A/B of the adaptive spin's budget on the 16-core machine (2026-12-06). The working tree = the library
# of HEAD (build.txt) + an experiment switch (change.diff): RINGCAST_EXP_KEEP_SPIN=6 gives a wait its
# whole cap as budget while its endpoint's recent longest wait (decaying 1/32 a wait) fits in the cap,
# else the rule as built (about twice the recent waits); =7 the same for waits capped under 10 ms only
# (the workers' waits, not the executor's collect); 0 = the library as it is. showdown.py, variant c
# only, 1 run of 300 steps per invocation, torch loaded; W as given (8 pinned, 16 unpinned), the three
# arms rotated over the rounds.
set -uo pipefail
ws=${WS:-8}; rounds=${ROUNDS:-5}; tag=${TAG:-s40a}
out=${OUT:-/tmp/out}; work=/tmp/$tag; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/$tag.tgz" -C "$work" . ; }
trap pack EXIT
build=/tmp/b-s40
date -u > "$work/start.txt"; cp .dev40/build-rev.txt "$work/build.txt"; cp "$0" "$work/"; cp .dev40/change.diff "$work/change.diff"
if [ ! -e $build/python/ringcast/_core*.so ] || [ -n "${REBUILD:-}" ]; then
cmake -S . -B $build -DRINGCAST_BUILD_TESTS=OFF -DRINGCAST_BENCH_ZMQ=OFF -DPython_EXECUTABLE="$(command -v python3)" \
  -Dpybind11_DIR="$(python3 -m pybind11 --cmakedir)" > /tmp/s40-configure.log 2>&1 && cmake --build $build -j16 --target ringcast_python_core > /tmp/s40-build.log 2>&1 || { tail -30 /tmp/s40-build.log; exit 1; }
else echo "build reused"; fi
lscpu | grep -E "^Model:" | tee "$work/machine.txt"; date -u +%T
for w in $ws; do
  for r in $(seq 1 $rounds); do
    case $((r % 3)) in 1) order="0 6 7";; 2) order="6 7 0";; 0) order="7 0 6";; esac
    for m in $order; do
      RINGCAST_EXP_KEEP_SPIN=$m PYTHONPATH=$build/python timeout 120 python3 bench/showdown/showdown.py --workers $w --steps 300 --repeats 1 \
        --variants c --import-torch --out "$work/w$w-r$r-m$m" > "$work/w$w-r$r-m$m.txt" 2>&1
      echo "w$w r$r m$m rc=$? $(date -u +%T) $(grep -E '^\(c\).* (sync|async) ' "$work/w$w-r$r-m$m.txt" | head -4 | awk '{print $5"/"$6":"$9}' | tr '\n' ' ')"
    done
  done
done
echo "end $(date -u +%T)"
