#!/usr/bin/env bash
# Call F of 2026-12-06 (session 39): call E again at W=16 only (its W=16 rounds were not understood): an A/B of the adaptive spin's budget. The working tree = the library
# of ef1db6a + an experiment switch (change.diff): RINGCAST_EXP_KEEP_SPIN=4 gives every wait capped under
# 10 ms (a MessageQueue reader's, a worker's) its whole cap as budget instead of about twice its recent
# waits; 0 = the library as it is. showdown.py, variant c only, 1 run of 300 steps per invocation, torch
# loaded; W=16 (17 processes on 16 CPUs, not pinned) then W=8 (pinned), the arms alternated over 3 rounds.
set -uo pipefail
out=${OUT:-/tmp/out}; work=/tmp/s39f; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/s39f.tgz" -C "$work" . ; }
trap pack EXIT
build=/tmp/b-s39f
date -u > "$work/start.txt"; cp .dev39/build-rev.txt "$work/build.txt"; cp "$0" "$work/"; cp .dev39/spin-budget-change.diff "$work/change.diff"
cmake -S . -B $build -DRINGCAST_BUILD_TESTS=OFF -DRINGCAST_BENCH_ZMQ=OFF -DPython_EXECUTABLE="$(command -v python3)" \
  -Dpybind11_DIR="$(python3 -m pybind11 --cmakedir)" > /tmp/s39f-configure.log 2>&1 && cmake --build $build -j16 --target ringcast_python_core > /tmp/s39f-build.log 2>&1 || { tail -30 /tmp/s39f-build.log; exit 1; }
lscpu | grep -E "^Model:"; date -u +%T
for w in 16; do
  for r in 1 2 3; do
    if (( r % 2 )); then order="0 4"; else order="4 0"; fi
    for m in $order; do
      RINGCAST_EXP_KEEP_SPIN=$m PYTHONPATH=$build/python timeout 120 python3 bench/showdown/showdown.py --workers $w --steps 300 --repeats 1 \
        --variants c --import-torch --out "$work/w$w-r$r-m$m" > "$work/w$w-r$r-m$m.txt" 2>&1; (cd "$work" && tar czf "$out/s39f.tgz" .)
      echo "w$w r$r m$m rc=$? $(date -u +%T) $(grep -E '^\(c\).* (sync|async) ' "$work/w$w-r$r-m$m.txt" | awk '{print $5"/"$6":"$9}' | tr '\n' ' ')"
    done
  done
done
echo "end $(date -u +%T)"
