#!/usr/bin/env bash
# Call E (packed into $OUT/s35e.tgz): the build in build-rev.txt on Python 3.12 (the device's): the asyncio,
# vLLM plug-in, dequeue_many-thread and gather tests, three times over (the claims' lock, a watch's close
# handed across threads, the fork hook), and the GPU tests' Python part once.
set -uo pipefail
out=${OUT:-/tmp/out}; work=/tmp/s35e; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/s35e.tgz" -C "$work" . ; }
trap pack EXIT
b=/tmp/b-s35e
date -u > "$work/start.txt"; cp .dev35/build-rev.txt "$work/"; cp "$0" "$work/"
cmake -S . -B "$b" -DCMAKE_BUILD_TYPE=Release -DRINGCAST_BUILD_TESTS=OFF -DRINGCAST_BUILD_BENCH=OFF -DRINGCAST_BUILD_TOOLS=OFF \
  -DRINGCAST_HIP=OFF -DCMAKE_CUDA_ARCHITECTURES=90 -DPython_EXECUTABLE="$(command -v python3)" \
  -Dpybind11_DIR="$(python3 -m pybind11 --cmakedir)" > "$work/configure.log" 2>&1; echo "configure rc=$?"
cmake --build "$b" -j16 > "$work/build.log" 2>&1; echo "build rc=$? $(date -u +%T)"; tail -2 "$work/build.log"
for i in 1 2 3; do
  PYTHONPATH=$b/python timeout 150 python3 -m pytest -q -p no:cacheprovider tests/python/test_aio.py tests/python/test_vllm_plugin.py \
    tests/python/test_dequeue_many_threads.py tests/python/test_gather.py > "$work/py-$i.log" 2>&1
  echo "round $i rc=$? $(date -u +%T)"; tail -1 "$work/py-$i.log"
done
RINGCAST_GPU_PY_MESSAGES=300 PYTHONPATH=$b/python timeout 120 python3 -m pytest -q -rs -p no:cacheprovider tests/python/test_gpu.py > "$work/gpu.log" 2>&1
echo "gpu rc=$?"; tail -1 "$work/gpu.log"
