#!/usr/bin/env bash
# Builds the benchmarks and runs the whole matrix on a bigger machine (used for the 16-core H200
# machine through the device tool: no apt, no ZeroMQ, no pybind11 needed). Writes into $1 (default
# ./device-report): strategies.txt/json, matrix.txt, report.tgz (JSON, plots, micro.json), logs.
# Usage: bench/device_matrix.sh [OUTDIR] [extra matrix args...]
set -euo pipefail
out=${1:-device-report}; shift || true
mkdir -p "$out"
build=${BUILD_DIR:-/tmp/ringcast-bench-build}
jobs=$(nproc)
cmake -S . -B "$build" -DRINGCAST_BUILD_PYTHON=OFF -DRINGCAST_BUILD_TESTS=OFF -DRINGCAST_BENCH_ZMQ=OFF \
  >"$out/configure.log" 2>&1 || { tail -40 "$out/configure.log"; exit 1; }
cmake --build "$build" -j"$jobs" --target ringcast_bench ringcast_micro >"$out/build.log" 2>&1 ||
  { tail -60 "$out/build.log"; exit 1; }
"$build/bench/ringcast-bench" strategies --readers 2 --json "$out/strategies.json" 2>&1 | tee "$out/strategies.txt"
"$build/bench/ringcast-bench" matrix --out "$out/report" "$@" 2>"$out/matrix.log" | tee "$out/matrix.txt"
tar czf "$out/report.tgz" -C "$out" report && rm -rf "$out/report"
