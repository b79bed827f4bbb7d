#!/usr/bin/env bash
# Call C of 2026-12-04 20:2x (packed into $OUT/s26c.tgz): the Python GPU tests on a CUDA build after the
# change of the reader's device copy (a chunk lock; a failed copy's chunk given back at shutdown), and the
# queue / gather / help / stub tests of the SegmentError change.
set -uo pipefail
out=${OUT:-/tmp/out}; work=/tmp/s26c; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/s26c.tgz" -C "$work" . ; }
trap pack EXIT
b=/tmp/b-s26c
date -u > "$work/start.txt"; cp .old/build-rev.txt "$work/build.txt"; cp "$0" "$work/"
cmake -S . -B "$b" -DCMAKE_BUILD_TYPE=Release -DRINGCAST_BUILD_TESTS=OFF -DRINGCAST_BENCH_ZMQ=OFF -DRINGCAST_HIP=OFF \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DPython_EXECUTABLE="$(command -v python3)" -Dpybind11_DIR="$(python3 -m pybind11 --cmakedir)" \
  > "$work/configure.log" 2>&1 && \
cmake --build "$b" -j16 --target ringcast_python_core ringcast_python_gpu > "$work/build.log" 2>&1
echo "build rc=$? $(date -u +%T)"; tail -3 "$work/build.log"
RINGCAST_GPU_PY_MESSAGES=300 PYTHONPATH=$b/python timeout 150 python3 -m pytest -q -rs -p no:cacheprovider \
  tests/python/test_gpu.py tests/python/test_vllm_plugin.py tests/python/test_one_call.py > "$work/python_gpu_tests.log" 2>&1
echo "gpu tests rc=$? $(date -u +%T)"; tail -8 "$work/python_gpu_tests.log"
PYTHONPATH=$b/python timeout 150 python3 -m pytest -q -rs -p no:cacheprovider \
  tests/python/test_queue.py tests/python/test_gather.py tests/python/test_help.py tests/python/test_stub.py > "$work/python_tests.log" 2>&1
echo "python tests rc=$? $(date -u +%T)"; tail -8 "$work/python_tests.log"
