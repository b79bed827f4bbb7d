#!/usr/bin/env bash
# Call B of 2026-12-05 afternoon (packed into $OUT/s32b.tgz):
#  1. A/B of prefetch.diff (a collect asks for every pending ring's record line at once): the Python module of
#     HEAD (base) and of HEAD + prefetch.diff (pf), built alike; bench_collect_width.py --workers 8 (3 rounds
#     each) and showdown.py --variants c --workers 8 --import-torch, 1 run x 300 steps, pinned, alternated, 3 rounds;
#  2. a CUDA build at HEAD; the C++ GPU tests (real processes on the GPU), the Python GPU tests (test_gpu, the
#     vLLM plug-in, one-call paths);
#  3. the showdown at W=16 (17 processes on 16 CPUs, not pinned), variants a c, 7 runs x 300 steps, --import-torch.
set -uo pipefail
out=${OUT:-/tmp/out}; work=/tmp/s32b; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; rm -f "$work/sd/showdown.tgz"; tar czf "$out/s32b.tgz" -C "$work" . ; }
trap pack EXIT
date -u > "$work/start.txt"; cp .dev32/build-rev.txt "$work/build.txt"; cp "$0" .dev32/prefetch.diff "$work/"; t0=$SECONDS
left() { echo $(( 570 - (SECONDS - t0) )); }
pyd=$(python3 -m pybind11 --cmakedir)
rm -rf /tmp/pfsrc; mkdir /tmp/pfsrc; tar cf - --exclude=./.git --exclude=./.dev32 . | tar xf - -C /tmp/pfsrc
{ patch -p1 -s -d /tmp/pfsrc < .dev32/prefetch.diff || (d=$PWD; cd /tmp/pfsrc && git apply "$d/.dev32/prefetch.diff"); } ; echo "patch rc=$?"
conf() { cmake -S "$1" -B "$2" -DCMAKE_BUILD_TYPE=Release -DRINGCAST_BUILD_TESTS=OFF -DRINGCAST_BUILD_BENCH=OFF -DRINGCAST_BUILD_TOOLS=OFF \
  -DRINGCAST_BENCH_ZMQ=OFF -DRINGCAST_CUDA=OFF -DRINGCAST_HIP=OFF -DPython_EXECUTABLE="$(command -v python3)" -Dpybind11_DIR="$pyd" > "$work/conf-$3.log" 2>&1 &&
  cmake --build "$2" -j8 --target ringcast_python_core > "$work/build-$3.log" 2>&1; echo "build $3 rc=$? $(date -u +%T)"; }
conf . /tmp/bb base & conf /tmp/pfsrc /tmp/bp pf & wait
grep -c prefetch_head /tmp/pfsrc/src/gather.cpp src/gather.cpp
for r in 1 2 3; do
  for arm in base:/tmp/bb/python pf:/tmp/bp/python; do
    l=${arm%%:*}; p=${arm#*:}
    PYTHONPATH=$p timeout 40 python3 bench/python/bench_collect_width.py --workers 8 --rounds 1 > "$work/cw-$l-$r.txt" 2>&1
    echo "cw $l-$r rc=$? $(tail -1 "$work/cw-$l-$r.txt")"
    PYTHONPATH=$p timeout 60 python3 bench/showdown/showdown.py --variants c --workers 8 --steps 300 --repeats 1 --import-torch --out "$work/sd-$l-$r" > "$work/sd-$l-$r.txt" 2>&1
    echo "sd $l-$r rc=$? $(grep -E '^\(c\)' "$work/sd-$l-$r.txt" | awk '{print $5, $6, $9}' | tr '\n' ' ')"
  done
done
echo "ab done $(date -u +%T) left $(left)"
b=/tmp/b-s32b; nvidia-smi -L > "$work/gpu.txt" 2>&1
cmake -S . -B "$b" -DCMAKE_BUILD_TYPE=Release -DRINGCAST_BUILD_TESTS=ON -DRINGCAST_BUILD_BENCH=OFF -DRINGCAST_BUILD_TOOLS=OFF \
  -DRINGCAST_BENCH_ZMQ=OFF -DRINGCAST_HIP=OFF -DCMAKE_CUDA_ARCHITECTURES=90 -DPython_EXECUTABLE="$(command -v python3)" \
  -Dpybind11_DIR="$pyd" > "$work/configure.log" 2>&1; echo "configure rc=$?"; tail -2 "$work/configure.log"
cmake --build "$b" -j16 --target ringcast_python_core ringcast_python_gpu ringcast_gpu_cuda_tests ringcast_gpu_shim_tests > "$work/build.log" 2>&1
echo "build rc=$? $(date -u +%T)"; tail -3 "$work/build.log"
for t in ringcast_gpu_shim_tests ringcast_gpu_cuda_tests; do
  x=$(find "$b" -name $t -type f | head -1); [ -n "$x" ] || { echo "$t not built"; continue; }
  timeout 120 "$x" > "$work/$t.log" 2>&1; echo "$t rc=$? $(date -u +%T)"; grep -E "PASSED|FAILED|SKIPPED \]" "$work/$t.log" | tail -6
done
RINGCAST_GPU_PY_MESSAGES=300 PYTHONPATH=$b/python timeout 150 python3 -m pytest -q -rs -p no:cacheprovider \
  tests/python/test_gpu.py tests/python/test_vllm_plugin.py tests/python/test_one_call.py > "$work/python_gpu_tests.log" 2>&1
echo "gpu tests rc=$? $(date -u +%T) left $(left)"; tail -8 "$work/python_gpu_tests.log"
if (( $(left) > 220 )); then
  SHOWDOWN_ARGS="--variants ac --import-torch" WORKERS="16" REPEATS=7 STEPS=300 BUILD_DIR=/tmp/b-s32a timeout $(( $(left) - 10 )) bash bench/showdown/device_showdown.sh "$work/sd16" > "$work/sd16-log.txt" 2>&1
  echo "showdown w16 rc=$? $(date -u +%T)"; grep -E "^\s+\[|idle|^== showdown" "$work/sd16-log.txt" | tail -20
else echo "w16 skipped: $(left) s left"; fi
