#!/usr/bin/env bash
# Does a ring's footprint cost a hop or a step? The tree is c9f01fa plus two experiment hooks, not
# committed: RCB_REQ_CAP / RCB_REP_CAP set the request / reply ring capacity of ringcast-bench's ringcast
# and floor_ring rows (default 1 MiB / 64 KiB), and showdown.py's variant (h) = (c) with 64 KiB rings (the
# request ring and each reply ring; the defaults are 16 MiB and 1 MiB).
# 1) hop --readers 1, 7 rounds, alternated: default caps / both 64 KiB, 2 invocations each; then
#    hop --readers 2 twice (default caps), last.
# 2) showdown W=$SD_WORKERS (default 8), variants a c h, 5 interleaved runs x 300 steps, torch, pinned.
set -uo pipefail
tag=${TAG:-s50a}
out=${OUT:-/tmp/out}; work=/tmp/$tag; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/$tag.tgz" -C "$work" . ; }
trap pack EXIT
build=/tmp/b-s50
date -u > "$work/start.txt"; cp .dev50/build-rev.txt "$work/build.txt"; cp "$0" "$work/"; git status --short > "$work/tree-status.txt" 2>&1
git diff > "$work/tree.diff" 2>&1
lscpu | grep -E "^Model:|^Model name|^NUMA node\(|^L2|^L3" | tee "$work/machine.txt"
cmake -S . -B "$build" -DRINGCAST_BUILD_TESTS=OFF -DRINGCAST_BENCH_ZMQ=OFF -DRINGCAST_CUDA=OFF -DRINGCAST_HIP=OFF -DPython_EXECUTABLE="$(command -v python3)" \
  -Dpybind11_DIR="$(python3 -m pybind11 --cmakedir)" > "$work/configure.log" 2>&1 && cmake --build "$build" -j16 --target ringcast_bench ringcast_python_core > "$work/build.log" 2>&1 || { tail -30 "$work/configure.log" "$work/build.log"; exit 1; }
echo "built $(date -u +%T)"
for inv in 1 2; do
  for arm in default small; do
    if [ $arm = small ]; then export RCB_REQ_CAP=65536 RCB_REP_CAP=65536; else unset RCB_REQ_CAP RCB_REP_CAP; fi
    timeout 90 $build/bench/ringcast-bench hop --readers 1 --json "$work/hop-$arm-$inv.json" > "$work/hop-$arm-$inv.txt" 2>&1
    echo "hop $arm $inv rc=$? $(date -u +%T)"; grep -A9 "^p50 us" "$work/hop-$arm-$inv.txt" | grep -v "^order"; grep "^hybrid RTT / atomic" "$work/hop-$arm-$inv.txt" | cut -c1-80
  done
  pack
done
unset RCB_REQ_CAP RCB_REP_CAP
for w in ${SD_WORKERS:-8}; do
  mkdir -p "$work/w$w"
  PYTHONPATH="$build/python" timeout 200 python3 bench/showdown/showdown.py --workers $w --steps 300 --repeats 5 --variants ach \
    --import-torch --out "$work/w$w" > "$work/showdown-w$w.txt" 2>&1
  echo "showdown W=$w rc=$? $(date -u +%T)"; pack
  grep -E "^\((a|c|h)\)|^python floor" "$work/showdown-w$w.txt" | head -40
done
for inv in 1 2; do  # two readers: what the fences cost there (floor_ring_asym / floor_ring_tail)
  timeout 90 $build/bench/ringcast-bench hop --readers 2 --json "$work/hop-r2-$inv.json" > "$work/hop-r2-$inv.txt" 2>&1
  echo "hop readers=2 $inv rc=$? $(date -u +%T)"; grep -A9 "^p50 us" "$work/hop-r2-$inv.txt" | grep -v "^order"; grep "^hybrid RTT" "$work/hop-r2-$inv.txt" | cut -c1-80
done
pack
echo "end $(date -u +%T)"
