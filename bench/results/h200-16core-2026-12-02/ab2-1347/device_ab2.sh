#!/usr/bin/env bash
# One device call: old = 3803576 (.old/old.tgz), new = the working tree (HEAD 56c48bd).
#  1. the Python GPU tests on new (CUDA build; 300 objects)
#  2. bench_gpu_loaded.py on new (torch 2.11 installed there)
#  3. bench_step_split.py A/B, W=8 and W=2 all-rank, alternated, 3 rounds
#  4. showdown A/B (variants a, c), W=2 and W=8, alternated, 3 rounds, 1 run each
# Everything is packed into $OUT/ab2.tgz (the device returns at most 8 files).
set -uo pipefail
out=${OUT:-/tmp/out}; work=/tmp/ab2; mkdir -p "$out" "$work"
py=python3
pbd="$("$py" -m pybind11 --cmakedir)"
build_one() {  # src dir, build dir, name
  cmake -S "$1" -B "$2" -DRINGCAST_BUILD_TESTS=OFF -DRINGCAST_BENCH_ZMQ=OFF -DPython_EXECUTABLE="$(command -v $py)" \
    -Dpybind11_DIR="$pbd" >"$work/configure-$3.log" 2>&1 || { tail -30 "$work/configure-$3.log"; exit 1; }
  cmake --build "$2" -j"$(nproc)" >"$work/build-$3.log" 2>&1 || { tail -40 "$work/build-$3.log"; exit 1; }
}
pack() { tar czf "$out/ab2.tgz" -C "$work" . ; }
trap pack EXIT
mkdir -p /tmp/oldsrc && tar xzf .old/old.tgz -C /tmp/oldsrc
build_one . /tmp/b-new new &
build_one /tmp/oldsrc /tmp/b-old old &
wait
echo "built: $(date -u +%H:%M:%S)"
RINGCAST_GPU_PY_MESSAGES=300 PYTHONPATH=/tmp/b-new/python timeout 240 "$py" -m pytest -q -rs -p no:cacheprovider \
  tests/python/test_gpu.py > "$work/python_gpu_tests.log" 2>&1; echo "gpu tests rc=$?"; tail -4 "$work/python_gpu_tests.log"
PYTHONPATH=/tmp/b-new/python timeout 180 "$py" bench/python/bench_gpu_loaded.py --runs 3 > "$work/gpu_loaded.txt" 2>&1
echo "gpu_loaded rc=$?"; cat "$work/gpu_loaded.txt"
for round in 1 2 3; do
  for b in old new; do
    for w in 8 2; do
      f="$work/split-r$round-$b-w$w.txt"
      PYTHONPATH="/tmp/b-$b/python" timeout 120 "$py" bench/python/bench_step_split.py --workers "$w" --steps 2000 \
        --runs 1 --work-us 1000 > "$f" 2>&1
      echo "split r$round $b W=$w rc=$? $(grep -E 'collect: copy|after the last|overhead' "$f" | awk '{print $NF}' | tr '\n' ' ')"
    done
  done
done
for round in 1 2 3; do
  for b in old new; do
    for w in 2 8; do
      d="$work/showdown-r$round-$b-w$w"; mkdir -p "$d"
      PYTHONPATH="/tmp/b-$b/python" timeout 150 "$py" bench/showdown/showdown.py --workers "$w" --steps 300 \
        --repeats 1 --variants ac --out "$d" > "$d/log.txt" 2>&1
      echo "showdown r$round $b W=$w rc=$? $(date -u +%H:%M:%S)"
      grep -E "overhead p50" "$d/log.txt" | sed 's/ *p50 *[0-9.]* us  overhead p50 */ /' | sed "s/^  run 1\/1 /  /"
      rm -f "$d"/*.png
    done
  done
done
uname -a > "$work/machine.txt"; nproc >> "$work/machine.txt"
