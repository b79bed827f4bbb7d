#!/usr/bin/env bash
# Call D of 2026-12-06 (session 37): what of the readers' GIL cost is the queue's waiting? bench_gil.py's paced
# scenario (two reader threads of a writer process sending every 1 ms; the main thread's stretch) with the
# writer's options varied — the defaults, wake_ahead off, the adaptive spin off (spin_max_us=0: 10 us,
# then sleep), wait="futex" (no spin) — alternated over 3 rounds, 5 runs of 1 s each; the no-queue floors
# (sleep, sleep + unpickle) with the defaults' row of each round.
set -uo pipefail
out=${OUT:-/tmp/out}; work=/tmp/s37d; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/s37d.tgz" -C "$work" . ; }
trap pack EXIT
b=/tmp/b-s37d
date -u > "$work/start.txt"; cp .dev37/build-rev.txt "$work/build.txt"; cp "$0" "$work/"
cmake -S . -B "$b" -DRINGCAST_BUILD_TESTS=OFF -DRINGCAST_BENCH_ZMQ=OFF -DPython_EXECUTABLE="$(command -v python3)" \
  -Dpybind11_DIR="$(python3 -m pybind11 --cmakedir)" > "$work/configure.log" 2>&1
cmake --build "$b" -j16 --target ringcast_python_core > "$work/build.log" 2>&1; echo "build rc=$? $(date -u +%T)"
variants=('default|{}' 'no_wake_ahead|{"wake_ahead": false}' 'no_adaptive_spin|{"spin_max_us": 0}' 'futex|{"wait": "futex"}')
for round in 1 2 3; do
  for v in "${variants[@]}"; do
    name=${v%%|*}; kw=${v#*|}
    sc=paced; [ "$name" = default ] && sc=paced,sleep,sleepwork
    PYTHONPATH=$b/python timeout 90 python3 bench/python/bench_gil.py --runs 5 --scenarios "$sc" --queue-kwargs "$kw" \
      > "$work/r$round-$name.txt" 2>&1
    echo "round $round $name rc=$? $(date -u +%T)"; grep -E "^\| T=2" "$work/r$round-$name.txt" | cut -c1-150
  done
done
echo "end $(date -u +%T)"
