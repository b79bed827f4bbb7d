#!/usr/bin/env bash
# Session 18, call D (packed into $OUT/s18d.tgz): does loading torch change the showdown's figures?
# W=2, variants a c, 2 runs per invocation, four invocations alternated: torch, none, torch, none.
set -uo pipefail
out=${OUT:-/tmp/out}; work=/tmp/s18d; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/s18d.tgz" -C "$work" . ; }
trap pack EXIT
b=/tmp/b-s18d; py=python3
date -u > "$work/start.txt"; cp .old/build-rev.txt "$work/build.txt"
cmake -S . -B "$b" -DRINGCAST_BUILD_TESTS=OFF -DRINGCAST_BENCH_ZMQ=OFF -DPython_EXECUTABLE="$(command -v $py)" \
  -Dpybind11_DIR="$($py -m pybind11 --cmakedir)" > "$work/configure.log" 2>&1 || { tail -30 "$work/configure.log"; exit 1; }
cmake --build "$b" -j16 --target ringcast_python_core > "$work/build.log" 2>&1 || { tail -40 "$work/build.log"; exit 1; }
echo "built $(date -u +%T)"
for i in 1 2; do
  for mode in torch none; do
    flag=""; [ $mode = torch ] && flag="--import-torch"
    PYTHONPATH=$b/python timeout 110 $py bench/showdown/showdown.py --workers 2 --steps 300 --repeats 2 --variants ac $flag \
      --out "$work/$mode-$i" > "$work/$mode-$i.txt" 2>&1
    echo "$mode-$i rc=$? $(date -u +%T)"
    grep -E "^\((a|c)\)" "$work/$mode-$i.txt" | head -8 | awk '{printf "  %s\n", $0}' | cut -c1-200
  done
done
