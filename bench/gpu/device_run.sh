#!/bin/bash
# Builds the GPU interop and runs its tests and benchmarks on a CUDA machine, one log per step under
# $OUT (default ./gpu-out). Steps (STEPS, default "build test bench"): build (only the GPU targets and
# the Python modules), test (C++ shim + real-GPU suites, Python GPU tests), bench (C++ bandwidth and
# latency, Python tensor benchmark). Counts: RINGCAST_GPU_MESSAGES (C++, default 10000),
# RINGCAST_GPU_PY_MESSAGES (Python, default 10000), REPEATS (benchmarks, default 3).
# The bench step appends to the hop table the row under CUDA MPS; step hop measures the hop under the
# other setups a user can choose (cudaDeviceSchedule flags, stream priority, MPS with those), one table
# in hop_variants.txt. MPS is a user-space daemon started here with its pipe and log folders under /tmp
# and stopped again right after its rows; no GPU setting is changed.
# A step that fails is reported and the next one still runs; the exit status is the number of failures.
set -u
SRC=${SRC:-$(pwd)}
B=${B:-$SRC/build-gpu-dev}
OUT=${OUT:-$SRC/gpu-out}
STEPS=${STEPS:-build test bench hop}
REPEATS=${REPEATS:-3}
export RINGCAST_GPU_MESSAGES=${RINGCAST_GPU_MESSAGES:-10000}
export RINGCAST_GPU_PY_MESSAGES=${RINGCAST_GPU_PY_MESSAGES:-10000}
PY=${PY:-$(command -v python3)}
mkdir -p "$OUT"
failures=0
MPS=$(command -v nvidia-cuda-mps-control)
mps_start() {  # the CUDA MPS daemon, pipe and logs under /tmp; stopped by mps_stop (and at exit)
    [ -n "$MPS" ] || return 1
    export CUDA_MPS_PIPE_DIRECTORY=/tmp/ringcast-mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/ringcast-mps-log
    mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
    if ! "$MPS" -d; then
        unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
        return 1
    fi
    trap 'echo quit | timeout 20 "$MPS"' EXIT  # never leave the daemon running
}
mps_stop() {  # quits the daemon, appends the tail of its logs to mps.log
    echo quit | timeout 20 "$MPS"
    trap - EXIT
    sleep 1
    { tail -8 "$CUDA_MPS_LOG_DIRECTORY"/control.log; tail -8 "$CUDA_MPS_LOG_DIRECTORY"/server.log; } >> "$OUT/mps.log" 2>&1
    unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
}
MPS_SETUP="MPS (nvidia-cuda-mps-control -d before both processes start)"
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
        nvidia-smi --query-gpu=name,driver_version,memory.total,compute_mode --format=csv,noheader > "$OUT/gpu.txt" 2>&1
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
        # The hop table's second row: the same hop with the MPS daemon running (docs/gpu.md).
        if mps_start; then
            timeout 120 "$B/bench/gpu/ringcast_gpu_bench" "$REPEATS" --hop-only "$MPS_SETUP" >> "$OUT/gpu_bench.txt" 2>&1 ||
                echo "| $MPS_SETUP | failed: exit $? |" >> "$OUT/gpu_bench.txt"
            mps_stop
        else
            echo "# no MPS row: nvidia-cuda-mps-control is missing or did not start" >> "$OUT/gpu_bench.txt"
        fi
        cat "$OUT/gpu_bench.txt"
        step python-tensor-bench python_tensor_bench.txt env PYTHONPATH="$B/python" "$PY" \
            "$SRC/bench/python/bench_gpu_tensor.py" --repeats "$REPEATS"
        cat "$OUT/python_tensor_bench.txt"
        ;;
    hop)
        H="$B/bench/gpu/ringcast_gpu_bench"
        V="$OUT/hop_variants.txt"
        : > "$V"
        hop_variant() {  # hop_variant SETUP [VAR=value...]: the hop-only benchmark, rows labelled SETUP
            local setup=$1
            shift
            env "$@" timeout 120 "$H" "$REPEATS" --hop-only "$setup" >> "$V" 2>&1 || echo "| $setup $* | failed: exit $? |" >> "$V"
        }
        hop_variant "default" RINGCAST_GPU_BENCH_SCHED=spin
        hop_variant "default" RINGCAST_GPU_BENCH_SCHED=blocking
        hop_variant "default" RINGCAST_GPU_BENCH_PRIORITY=high
        if mps_start; then
            hop_variant "$MPS_SETUP" RINGCAST_GPU_BENCH_SCHED=spin
            hop_variant "$MPS_SETUP" RINGCAST_GPU_BENCH_PRIORITY=high
            mps_stop
        else
            echo "MPS: nvidia-cuda-mps-control is missing or did not start" >> "$V"
        fi
        cat "$V"
        ;;
    esac
done
exit $failures
