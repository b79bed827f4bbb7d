#!/usr/bin/env bash
# W=8 showdown (a) vs (c), 5 interleaved runs of 300 steps, pinned: traced (--trace) then untraced with
# torch loaded, both with --dump-steps; then the core hop 3 times. At this tree's build (build.txt).
set -uo pipefail
tag=${TAG:-s43a}
out=${OUT:-/tmp/out}; work=/tmp/$tag; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/$tag.tgz" -C "$work" . ; }
trap pack EXIT
date -u > "$work/start.txt"; cp .dev43/build-rev.txt "$work/build.txt"; cp "$0" "$work/"
lscpu | grep -E "^Model:|^Model name" | tee "$work/machine.txt"
b=/tmp/b-$tag
cmake -S . -B $b -DRINGCAST_BUILD_TESTS=OFF -DRINGCAST_BENCH_ZMQ=OFF -DPython_EXECUTABLE="$(command -v python3)" \
  -Dpybind11_DIR="$(python3 -m pybind11 --cmakedir)" > $work/configure.log 2>&1 && cmake --build $b -j16 --target ringcast_bench ringcast_python_core > $work/build.log 2>&1 || { tail -30 $work/build.log; exit 1; }
echo "built $(date -u +%T)"; pack
sd() { name=$1; shift; mkdir -p "$work/$name"; PYTHONPATH=$b/python timeout 200 python3 bench/showdown/showdown.py --workers 8 --steps 300 --repeats 5 --variants ac --dump-steps --out "$work/$name" "$@" > "$work/$name.txt" 2>&1; echo "$name rc=$? $(date -u +%T)"; rm -f "$work/$name/showdown.png"; pack; }
sd trace-w8 --trace
sd torch-w8 --import-torch
for i in 1 2 3; do timeout 40 $b/bench/ringcast-bench hop --readers 1 > "$work/hop-$i.txt" 2>&1; echo "hop $i rc=$? $(date -u +%T)"; tail -3 "$work/hop-$i.txt"; pack; done
echo "end $(date -u +%T)"
