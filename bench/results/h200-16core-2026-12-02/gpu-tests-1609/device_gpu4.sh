#!/usr/bin/env bash
# HEAD (37e3c02): the Python GPU tests on a CUDA build of the Python modules only; packed into $OUT/gpu4.tgz.
set -uo pipefail
out=${OUT:-/tmp/out}; work=/tmp/gpu4; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/gpu4.tgz" -C "$work" . ; }
trap pack EXIT
py=python3; b=/tmp/b-gpu4
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$work/gpu.txt" 2>&1
cmake -S . -B "$b" -DCMAKE_BUILD_TYPE=Release -DRINGCAST_BUILD_TESTS=OFF -DRINGCAST_BENCH_ZMQ=OFF -DRINGCAST_HIP=OFF \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DPython_EXECUTABLE="$(command -v $py)" -Dpybind11_DIR="$($py -m pybind11 --cmakedir)" \
  > "$work/configure.log" 2>&1 || { tail -30 "$work/configure.log"; exit 1; }
cmake --build "$b" -j"$(nproc)" --target ringcast_python_core ringcast_python_gpu > "$work/build.log" 2>&1 || { tail -40 "$work/build.log"; exit 1; }
grep -E "ringcast GPU" "$work/configure.log"
ls "$b/python/ringcast/" | head -20
RINGCAST_GPU_PY_MESSAGES=300 PYTHONPATH=$b/python timeout 120 $py -m pytest -q -rs -p no:cacheprovider \
  tests/python/test_gpu.py tests/python/test_vllm_plugin.py > "$work/python_gpu_tests.log" 2>&1
echo "gpu tests rc=$?"; tail -8 "$work/python_gpu_tests.log"
