#!/bin/bash
# Builds the GPU interop and runs its tests and benchmarks on a CUDA machine, one log per step under
# $OUT (default ./gpu-out). Steps (STEPS, default "build test bench"): build (only the GPU targets and
# the Python modules), test (C++ shim + real-GPU suites, Python GPU tests), bench (C++ bandwidth and
# latency, Python tensor benchmark). Counts: RINGCAST_GPU_MESSAGES (C++, default 10000),
# RINGCAST_GPU_PY_MESSAGES (Python, default 10000), REPEATS (benchmarks, default 3).
# A step that fails is reported and the next one still runs; the exit status is the number of failures.
set -u
SRC=${SRC:-$(pwd)}
B=${B:-$SRC/build-gpu-dev}
OUT=${OUT:-$SRC/gpu-out}
STEPS=${STEPS:-build test bench}
REPEATS=${REPEATS:-3}
export RINGCAST_GPU_MESSAGES=${RINGCAST_GPU_MESSAGES:-10000}
export RINGCAST_GPU_PY_MESSAGES=${RINGCAST_GPU_PY_MESSAGES:-10000}
PY=${PY:-$(command -v python3)}
mkdir -p "$OUT"
failures=0
step() {  # step NAME LOG COMMAND...: runs, times and reports one step
    local name=$1 log=$2
    shift 2
    local t0=$SECONDS
    "$@" > "$OUT/$log" 2>&1
    local rc=$?
    echo "== $name: exit $rc in $((SECONDS - t0)) s (log $log)"
    if [ $rc -ne 0 ]; then
        failures=$((failures + 1))
        tail -25 "$OUT/$log"
    fi
}
for s in $STEPS; do
    case $s in
    build)
        nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$OUT/gpu.txt" 2>&1
        cat "$OUT/gpu.txt"
        step configure configure.log cmake -S "$SRC" -B "$B" -DCMAKE_BUILD_TYPE=Release -DRINGCAST_HIP=OFF \
            -DCMAKE_CUDA_ARCHITECTURES=90 -DPython_EXECUTABLE="$PY" -Dpybind11_DIR="$($PY -m pybind11 --cmakedir)"
        grep "ringcast GPU" "$OUT/configure.log"
        step build build.log cmake --build "$B" -j"$(nproc)" --target ringcast_gpu_shim_tests ringcast_gpu_cuda_tests \
            ringcast_gpu_bench ringcast_python_core ringcast_python_gpu
        ;;
    test)
        step shim-tests shim_tests.log "$B/tests/gpu/ringcast_gpu_shim_tests"
        step cuda-tests cuda_tests.log "$B/tests/gpu/ringcast_gpu_cuda_tests"
        grep -E "info|OK|FAILED|SKIPPED" "$OUT/cuda_tests.log"
        step python-gpu-tests python_gpu_tests.log env PYTHONPATH="$B/python" "$PY" -m pytest -q -s -rs \
            -p no:cacheprovider "$SRC/tests/python/test_gpu.py"
        tail -4 "$OUT/python_gpu_tests.log"
        ;;
    bench)
        step gpu-bench gpu_bench.txt "$B/bench/gpu/ringcast_gpu_bench" "$REPEATS"
        cat "$OUT/gpu_bench.txt"
        step python-tensor-bench python_tensor_bench.txt env PYTHONPATH="$B/python" "$PY" \
            "$SRC/bench/python/bench_gpu_tensor.py" --repeats "$REPEATS"
        cat "$OUT/python_tensor_bench.txt"
        ;;
    esac
done
exit $failures
