#!/usr/bin/env bash
# The build at HEAD (build.txt): the showdown W=8 then W=2, variants a c, 5 interleaved runs of 300 steps,
# torch loaded, pinned, --dump-steps (device_showdown.sh, with its strategy table and neighbour probes);
# all_single.py on both dumps; then the core hop three times, as far as the time allows.
set -uo pipefail
tag=${TAG:-s53a}
out=${OUT:-/tmp/out}; work=/tmp/$tag; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/$tag.tgz" -C "$work" . ; }
trap pack EXIT
build=/tmp/b-s53
t0=$SECONDS
date -u > "$work/start.txt"; cp .dev53/build-rev.txt "$work/build.txt"; cp "$0" "$work/"; git status --short > "$work/tree-status.txt" 2>&1
lscpu | grep -E "^Model:|^Model name" | tee "$work/machine.txt"
cmake -S . -B "$build" -DRINGCAST_BUILD_TESTS=OFF -DRINGCAST_BENCH_ZMQ=OFF -DRINGCAST_CUDA=OFF -DRINGCAST_HIP=OFF -DPython_EXECUTABLE="$(command -v python3)" \
  -Dpybind11_DIR="$(python3 -m pybind11 --cmakedir)" > "$work/configure.log" 2>&1 && cmake --build "$build" -j16 > "$work/build.log" 2>&1 || { tail -30 "$work/build.log"; exit 1; }
echo "built $(date -u +%T) ($((SECONDS - t0)) s)"
SHOWDOWN_ARGS="--variants ac --import-torch --dump-steps" WORKERS="8 2" REPEATS=5 STEPS=300 BUILD_DIR=$build timeout $((440 - (SECONDS - t0))) bash bench/showdown/device_showdown.sh "$work/sd" > "$work/sd-log.txt" 2>&1
echo "showdown rc=$? $(date -u +%T) ($((SECONDS - t0)) s)"; pack
grep -E "^\((a|c)\)|^python floor|^== showdown|^  \[" "$work/sd-log.txt" | head -70
for w in 8 2; do [ -f "$work/sd/w$w/steps.json.gz" ] && python3 bench/showdown/all_single.py "$work/sd/w$w/steps.json.gz" --json "$work/all-single-w$w.json" > "$work/all-single-w$w.txt" 2>&1; echo "== all_single W=$w"; tail -6 "$work/all-single-w$w.txt"; done
pack
for i in 1 2 3; do
  (( SECONDS - t0 < 540 )) || break
  timeout 25 $build/bench/ringcast-bench hop --readers 1 --json "$work/hop-$i.json" > "$work/hop-$i.txt" 2>&1
  echo "hop $i rc=$? $(date -u +%T) $(grep -E '^hybrid RTT|x atomic' "$work/hop-$i.txt" | head -3 | tr '\n' ' ')"; pack
done
echo "end $(date -u +%T) ($((SECONDS - t0)) s)"
