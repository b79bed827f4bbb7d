#!/usr/bin/env bash
# A CUDA build of HEAD on the H100's host (phase "cpp": configure, build, the C++ GPU tests (shim, CUDA) on
# the GPU and the whole core test binary; phase "py", on the same warm machine: the Python tests, the GPU
# ones on the GPU; no ZeroMQ there: the remote ones skip).
set -uo pipefail
phase=${1:-cpp}
out=${OUT:-/tmp/out}; work=/tmp/s49a-$phase; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/s49a-$phase.tgz" -C "$work" . ; }
trap pack EXIT
b=$PWD/build-s49
date -u > "$work/start.txt"; cp .dev49/build-rev.txt "$work/"; cp "$0" "$work/"; nvidia-smi -L > "$work/gpu.txt" 2>&1
grep -m1 -E "^model\s" /proc/cpuinfo > "$work/machine.txt"; nproc >> "$work/machine.txt"; uname -r >> "$work/machine.txt"
if [ "$phase" = cpp ]; then
  cmake -S . -B "$b" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRINGCAST_BUILD_TESTS=ON -DRINGCAST_BENCH_ZMQ=OFF -DRINGCAST_HIP=OFF \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DPython_EXECUTABLE="$(command -v python3)" \
    -Dpybind11_DIR="$(python3 -m pybind11 --cmakedir)" > "$work/configure.log" 2>&1; echo "configure rc=$?"; grep "ringcast GPU" "$work/configure.log"
  cmake --build "$b" -j16 > "$work/build.log" 2>&1
  echo "build rc=$? $(date -u +%T)"; tail -3 "$work/build.log"
  for t in ringcast_gpu_shim_tests ringcast_gpu_cuda_tests ringcast_tests; do
    x=$(find "$b" -name $t -type f | head -1); [ -n "$x" ] || { echo "$t not built"; continue; }
    timeout 200 "$x" > "$work/$t.log" 2>&1; echo "$t rc=$? $(date -u +%T)"; grep -E "^\[  (PASSED|FAILED|SKIPPED) " "$work/$t.log" | tail -6
  done
else
  RINGCAST_GPU_PY_MESSAGES=300 PYTHONPATH=$b/python:tests/python timeout 500 python3 -m pytest -q -rs -p no:cacheprovider \
    tests/python > "$work/python_tests.log" 2>&1
  echo "python tests rc=$? $(date -u +%T)"; grep -E "passed|failed|FAILED|ERROR" "$work/python_tests.log" | tail -25
fi
