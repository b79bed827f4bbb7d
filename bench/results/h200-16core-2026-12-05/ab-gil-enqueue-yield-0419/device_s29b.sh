#!/usr/bin/env bash
# Call B of 2026-12-05 (packed into $OUT/s29b.tgz), two A/Bs on the 16-core machine:
#  1. the GIL stretch (bench_gil.py --runs 3): the Python module of 498d47e (before the 2026-12-05 change to the
#     adaptive spin's first yield and the collect's way to its wait) against this tree's, alternated, 3 rounds
#     (call A's 1.070 against 1.017-1.034 in every call before);
#  2. an executor that yields its CPU once after each enqueue (RC_EXP_YIELD=1, an experiment knob of this tree)
#     against the same module without it: showdown --variants ac, 300 steps x 1 run, W=16 (17 processes on 16
#     CPUs, not pinned) and W=2 (pinned), 3 rounds alternated.
set -uo pipefail
out=${OUT:-/tmp/out}; work=/tmp/s29b; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/s29b.tgz" -C "$work" . ; }
trap pack EXIT
date -u > "$work/start.txt"; cp "$0" "$work/"; t0=$SECONDS
late() { (( SECONDS - t0 > 500 )); }
pyd=$(python3 -m pybind11 --cmakedir)
mkdir -p /tmp/base-src && tar xzf .dev29/base-498d47e.tgz -C /tmp/base-src
conf() { cmake -S "$1" -B "$2" -DCMAKE_BUILD_TYPE=Release -DRINGCAST_BUILD_TESTS=OFF -DRINGCAST_BUILD_BENCH=OFF -DRINGCAST_BUILD_TOOLS=OFF \
  -DRINGCAST_BENCH_ZMQ=OFF -DPython_EXECUTABLE="$(command -v python3)" -Dpybind11_DIR="$pyd" > "$work/conf-$3.log" 2>&1 &&
  cmake --build "$2" -j8 --target ringcast_python_core > "$work/build-$3.log" 2>&1; echo "build $3 rc=$? $(date -u +%T)"; }
conf . /tmp/bh head & conf /tmp/base-src /tmp/bb base & wait
ls /tmp/bh/python/ringcast/ /tmp/bb/python/ringcast/ | head -30
for r in 1 2 3; do
  for arm in base:/tmp/bb/python head:/tmp/bh/python; do
    late && break; l=${arm%%:*}; p=${arm#*:}
    PYTHONPATH=$p timeout 60 python3 bench/python/bench_gil.py --runs 3 > "$work/gil-$l-$r.txt" 2>&1
    echo "gil $l-$r rc=$? $(grep 'writer process every' "$work/gil-$l-$r.txt" | cut -d'|' -f3-5)"
  done
done
for r in 1 2 3; do
  for w in 16 2; do
    for arm in o n; do
      late && break
      envkv=""; [ $arm = n ] && envkv="RC_EXP_YIELD=1"
      env $envkv PYTHONPATH=/tmp/bh/python timeout 70 python3 bench/showdown/showdown.py --workers $w --steps 300 --repeats 1 \
        --variants ac --out "$work/w$w-$arm-$r" > "$work/w$w-$arm-$r.txt" 2>&1
      echo "w$w $arm-$r rc=$? $(date -u +%T)"; grep -E "^\((a|c)\)" "$work/w$w-$arm-$r.txt" | head -8 | cut -c1-140
    done
  done
done
