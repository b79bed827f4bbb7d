#!/usr/bin/env bash
# The core hop with the wakeable and ring floors, two library variants alternated (ARMS):
#   base = the library at build.txt; v1 = base + the first look at the record's stamp (wait_for_data,
#   block_until's case 1 where a spin follows, the gather collect's spin steps); v3 = v1 + the hot
#   path inlined into write() and peek() and their waits out of line (v3.diff).
# Then, while the call has time, the W=8 showdown of (c) alone, base and v3 alternated.
set -uo pipefail
tag=${TAG:-s44c}
out=${OUT:-/tmp/out}; work=/tmp/$tag; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/$tag.tgz" -C "$work" . ; }
trap pack EXIT
date -u > "$work/start.txt"; cp .dev44/build-rev.txt "$work/build.txt"; cp "$0" .dev44/v1.diff .dev44/v3.diff "$work/"
lscpu | grep -E "^Model:|^Model name" | tee "$work/machine.txt"
build() {  # tree, build dir, name, targets...
  local src=$1 dir=$2 name=$3; shift 3
  cmake -S "$src" -B "$dir" -DRINGCAST_BUILD_TESTS=OFF -DRINGCAST_BUILD_TOOLS=OFF -DRINGCAST_BENCH_ZMQ=OFF \
    -DPython_EXECUTABLE="$(command -v python3)" -Dpybind11_DIR="$(python3 -m pybind11 --cmakedir)" > "$work/configure-$name.log" 2>&1 &&
  cmake --build "$dir" -j5 --target "$@" > "$work/build-$name.log" 2>&1 || { echo "BUILD FAILED $name"; tail -30 "$work/build-$name.log"; }
}
build .dev44/base /tmp/b-base base ringcast_bench ringcast_python_core &
build .dev44/v1 /tmp/b-v1 v1 ringcast_bench &
build .dev44/v3 /tmp/b-v3 v3 ringcast_bench ringcast_python_core &

wait
ls /tmp/b-base/bench/ringcast-bench /tmp/b-v1/bench/ringcast-bench /tmp/b-v3/bench/ringcast-bench || exit 1
echo "built $(date -u +%T)"; pack
i=0
for arm in ${ARMS:-base v1 v3 v3 v1 base base v3 v1}; do
  i=$((i+1)); timeout 60 /tmp/b-$arm/bench/ringcast-bench hop --readers 1 --json "$work/hop-$i-$arm.json" > "$work/hop-$i-$arm.txt" 2>&1
  echo "hop $i $arm rc=$? $(date -u +%T) $(grep -E '^hybrid RTT' "$work/hop-$i-$arm.txt" | sed -E 's/.*rounds: ([0-9.]+).*/\1/' | tr '\n' ' ')"
  pack
done
t0=$(date +%s)
for arm in ${SD_ARMS-base v3 v3 base}; do
  [ $(( $(date +%s) - t0 )) -lt 120 ] || { echo "no time left for showdown $arm"; break; }
  i=$((i+1)); mkdir -p "$work/sd-$i-$arm"
  PYTHONPATH=/tmp/b-$arm/python timeout 100 python3 .dev44/$arm/bench/showdown/showdown.py --workers 8 --steps 300 --repeats 3 \
    --variants c --import-torch --out "$work/sd-$i-$arm" > "$work/sd-$i-$arm.txt" 2>&1
  echo "showdown $i $arm rc=$? $(date -u +%T)"; rm -f "$work/sd-$i-$arm"/*.png; pack
done
echo "end $(date -u +%T)"
