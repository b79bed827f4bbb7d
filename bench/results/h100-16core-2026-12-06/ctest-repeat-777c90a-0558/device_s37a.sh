#!/usr/bin/env bash
# Call A of 2026-12-06 (session 37) (packed into $OUT/s37a.tgz): a build of the commit in build-rev.txt with tests (CUDA
# sm_90, no HIP; no liburing or ZeroMQ there: those parts are off), then the whole ctest suite twice on 16
# cores (--repeat until-fail:2, -j8), to find tests that fail under another machine's timing. The Promela
# model (no spin there) and the packaging tests (no network, no pip wheels) are left out.
set -uo pipefail
out=${OUT:-/tmp/out}; work=/tmp/s37a; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/s37a.tgz" -C "$work" . ; }
trap pack EXIT
b=/tmp/b-s37
date -u > "$work/start.txt"; cp .dev37/build-rev.txt "$work/"; cp "$0" "$work/"; nvidia-smi -L > "$work/gpu.txt" 2>&1
cmake -S . -B "$b" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRINGCAST_HIP=OFF -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DPython_EXECUTABLE="$(command -v python3)" -Dpybind11_DIR="$(python3 -m pybind11 --cmakedir)" > "$work/configure.log" 2>&1
echo "configure rc=$? $(date -u +%T)"; grep -iE "not found|disabled|skipp|warning" "$work/configure.log" | head -12
cmake --build "$b" -j16 > "$work/build.log" 2>&1; echo "build rc=$? $(date -u +%T)"; grep -E "error|FAILED" "$work/build.log" | head -10
(cd "$b" && timeout 420 ctest -j8 --repeat until-fail:2 --timeout 240 -E "protocol_model|python_packaging|install_consumer|fuzz_bounded|tools_" \
  --output-on-failure > "$work/ctest.log" 2>&1); echo "ctest rc=$? $(date -u +%T)"
grep -E "tests passed|tests failed|\*\*\*Failed|\*\*\*Timeout|Not Run" "$work/ctest.log" | head -30
grep -E "Total Test time" "$work/ctest.log"
