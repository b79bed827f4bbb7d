#!/usr/bin/env bash
# The core hop with the wakeable floor, three library variants alternated (ARMS):
#   base = the library at build.txt; v1 = base + the first look at the record's stamp (wait_for_data,
#   block_until's case 1 where a spin follows, the gather collect's spin steps); v2 = v1 + the
#   reader's release without its exchange (INCORRECT, an upper bound of what dropping it could give).
# Builds every bench first (and the Python binding of base and v1 for the next call).
set -uo pipefail
tag=${TAG:-s44a}
out=${OUT:-/tmp/out}; work=/tmp/$tag; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/$tag.tgz" -C "$work" . ; }
trap pack EXIT
date -u > "$work/start.txt"; cp .dev44/build-rev.txt "$work/build.txt"; cp "$0" .dev44/v1.diff "$work/"
lscpu | grep -E "^Model:|^Model name" | tee "$work/machine.txt"
build() {  # tree, build dir, name, targets...
  local src=$1 dir=$2 name=$3; shift 3
  cmake -S "$src" -B "$dir" -DRINGCAST_BUILD_TESTS=OFF -DRINGCAST_BUILD_TOOLS=OFF -DRINGCAST_BENCH_ZMQ=OFF \
    -DPython_EXECUTABLE="$(command -v python3)" -Dpybind11_DIR="$(python3 -m pybind11 --cmakedir)" > "$work/configure-$name.log" 2>&1 &&
  cmake --build "$dir" -j5 --target "$@" > "$work/build-$name.log" 2>&1 || { echo "BUILD FAILED $name"; tail -30 "$work/build-$name.log"; }
}
build .dev44/base /tmp/b-base base ringcast_bench ringcast_python_core &
build .dev44/v1 /tmp/b-v1 v1 ringcast_bench ringcast_python_core &
build .dev44/v2 /tmp/b-v2 v2 ringcast_bench &
wait
ls /tmp/b-base/bench/ringcast-bench /tmp/b-v1/bench/ringcast-bench /tmp/b-v2/bench/ringcast-bench || exit 1
echo "built $(date -u +%T)"; pack
i=0
for arm in ${ARMS:-base v1 v2 v2 v1 base}; do
  i=$((i+1)); timeout 45 /tmp/b-$arm/bench/ringcast-bench hop --readers 1 --json "$work/hop-$i-$arm.json" > "$work/hop-$i-$arm.txt" 2>&1
  echo "hop $i $arm rc=$? $(date -u +%T) $(grep -E '^hybrid RTT' "$work/hop-$i-$arm.txt" | sed -E 's/.*rounds: ([0-9.]+).*/\1/' | tr '\n' ' ')"
  pack
done
echo "end $(date -u +%T)"
