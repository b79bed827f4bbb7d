#!/usr/bin/env bash
# 1) ringcast-fanout (bench/profile/fanout.cpp): a broadcast to 1 / 4 / 8 waiting readers, by the order of
#    the writer's stores and with CLDEMOTE.
# 2) showdown W=8, variants a c, the library with the stamp's line written last (this tree) against the
#    same tree without it (lib.diff reversed), invocations in the order N B B N, 2 runs x 300 steps each,
#    torch, pinned, steps dumped.
set -uo pipefail
tag=${TAG:-s51b}
out=${OUT:-/tmp/out}; work=/tmp/$tag; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/$tag.tgz" -C "$work" . ; }
trap pack EXIT
date -u > "$work/start.txt"; cp "$0" .dev51/lib.diff "$work/"; git status --short > "$work/tree-status.txt" 2>&1
lscpu > "$work/lscpu.txt"; grep -E "^Model:|^Model name|^NUMA node\(|^L2|^L3|^Thread" "$work/lscpu.txt"
grep -o -w "cldemote\|waitpkg\|movdiri" /proc/cpuinfo | sort | uniq -c | tr '\n' ' '; echo
base=/tmp/base-src; rm -rf $base; mkdir -p $base
tar cf - --exclude=./build --exclude=./.dev51 --exclude=./.git . | tar xf - -C $base
(cd $base && { git apply -R /tmp/$tag/lib.diff || patch -R -p1 < /tmp/$tag/lib.diff; } > /tmp/$tag/patch-R.log 2>&1) || { echo "reverse patch failed"; cat "$work/patch-R.log"; exit 1; }
conf() { cmake -S "$1" -B "$2" -DRINGCAST_BUILD_TESTS=OFF -DRINGCAST_BENCH_ZMQ=OFF -DRINGCAST_CUDA=OFF -DRINGCAST_HIP=OFF -DPython_EXECUTABLE="$(command -v python3)" -Dpybind11_DIR="$(python3 -m pybind11 --cmakedir)"; }
(conf . /tmp/b-new > "$work/conf-new.log" 2>&1 && cmake --build /tmp/b-new -j8 --target ringcast_fanout ringcast_python_core > "$work/build-new.log" 2>&1; echo $? > "$work/build-new.rc") &
(conf $base /tmp/b-base > "$work/conf-base.log" 2>&1 && cmake --build /tmp/b-base -j8 --target ringcast_python_core > "$work/build-base.log" 2>&1; echo $? > "$work/build-base.rc") &
wait
echo "built new=$(cat $work/build-new.rc) base=$(cat $work/build-base.rc) $(date -u +%T)"
[ "$(cat $work/build-new.rc)$(cat $work/build-base.rc)" = 00 ] || { tail -20 "$work"/build-*.log; exit 1; }
f=/tmp/b-new/bench/profile/ringcast-fanout
run() { local n=$1; shift; timeout 60 $f "$@" > "$work/$n.txt" 2>&1; echo "== $n rc=$? $(date -u +%T)"; sed -n '/^median/,$p' "$work/$n.txt"; }
run r1-pin-1 --readers 1 --cpus 2,3
run r8-pin-1 --readers 8 --cpus 2,3,4,5,6,7,8,9,10
run r4-pin-1 --readers 4 --cpus 2,3,4,5,6
run r8-pin-l128 --readers 8 --line 128 --cpus 2,3,4,5,6,7,8,9,10
run r8-pin-2 --readers 8 --cpus 2,3,4,5,6,7,8,9,10

cat "$work/r8-pin-1.txt"; pack
i=0
for arm in new base base new; do
  i=$((i+1)); d="$work/sd$i-$arm"; mkdir -p "$d"
  b=/tmp/b-$arm
  PYTHONPATH="$b/python" timeout 110 python3 bench/showdown/showdown.py --workers 8 --steps 300 --repeats 2 --variants ac \
    --import-torch --dump-steps --out "$d" > "$d/showdown.txt" 2>&1
  echo "== showdown $i $arm rc=$? $(date -u +%T)"; grep -E "^\((a|c)\)|^python floor|all / single" "$d/showdown.txt" | head -12
  pack
done
for d in "$work"/sd*; do echo "== $d"; python3 bench/showdown/all_single.py "$d/steps.json.gz" 2>&1 | head -30; done > "$work/all_single.txt"
cat "$work/all_single.txt" | head -80
echo "end $(date -u +%T)"
