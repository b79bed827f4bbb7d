#!/usr/bin/env bash
# Which vCPUs of the VM share a core of the host? For every vCPU pair: the atomic hand-off round trip
# (ringcast-line-home, 2 pairs) and the showdown's pure-Python work beside the same work on the other
# vCPU against alone (vcpu_map.py). Twice, to see the map hold.
set -uo pipefail
tag=${TAG:-s49d}
out=${OUT:-/tmp/out}; work=/tmp/$tag; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/$tag.tgz" -C "$work" . ; }
trap pack EXIT
build=$PWD/build-s49h
date -u > "$work/start.txt"; git rev-parse --short HEAD > "$work/build.txt"; cp "$0" .dev49/vcpu_map.py "$work/"
lscpu > "$work/lscpu.txt"; grep -E "^Model:|^Thread|^Core|^Socket|^NUMA node\(" "$work/lscpu.txt" | tee "$work/machine.txt"
cat /sys/devices/system/cpu/cpu*/topology/thread_siblings_list > "$work/siblings.txt" 2>/dev/null
cmake -S . -B "$build" -DRINGCAST_BUILD_TESTS=OFF -DRINGCAST_BUILD_PYTHON=OFF -DRINGCAST_BUILD_TOOLS=OFF -DRINGCAST_BENCH_ZMQ=OFF \
  -DRINGCAST_CUDA=OFF -DRINGCAST_HIP=OFF > "$work/configure.log" 2>&1 && cmake --build "$build" -j16 --target ringcast_line_home > "$work/build.log" 2>&1 || { tail -30 "$work/configure.log" "$work/build.log"; exit 1; }
echo "built $(date -u +%T)"
for i in 1 2; do
  timeout 200 python3 .dev49/vcpu_map.py $build/bench/profile/ringcast-line-home > "$work/map-$i.txt" 2>&1
  echo "map $i rc=$? $(date -u +%T)"; sed -n '/^fastest/,$p' "$work/map-$i.txt"; pack
done
echo "end $(date -u +%T)"
