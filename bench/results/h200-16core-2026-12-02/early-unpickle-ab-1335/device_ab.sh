#!/usr/bin/env bash
# A/B on the device: the committed build before early unpickling (old, .old/old.tgz = git archive of
# 3803576) against the working tree (new), same harness (this tree's showdown.py), alternated.
set -uo pipefail
out=${OUT:-/tmp/out}; mkdir -p "$out"
py=python3
pbd="$("$py" -m pybind11 --cmakedir)"
build_one() {  # src dir, build dir, name
  cmake -S "$1" -B "$2" -DRINGCAST_BUILD_TESTS=OFF -DRINGCAST_BENCH_ZMQ=OFF -DPython_EXECUTABLE="$(command -v $py)" \
    -Dpybind11_DIR="$pbd" >"$out/configure-$3.log" 2>&1 || { tail -30 "$out/configure-$3.log"; exit 1; }
  cmake --build "$2" -j"$(nproc)" >"$out/build-$3.log" 2>&1 || { tail -40 "$out/build-$3.log"; exit 1; }
}
mkdir -p /tmp/oldsrc && tar xzf .old/old.tgz -C /tmp/oldsrc
build_one . /tmp/b-new new &
build_one /tmp/oldsrc /tmp/b-old old &
wait
echo "built: $(date -u +%H:%M:%S)"
for round in ${ROUNDS:-1 2 3}; do
  for b in old new; do
    for w in ${WORKERS:-2 8}; do
      d="$out/r$round-$b-w$w"; mkdir -p "$d"
      PYTHONPATH="/tmp/b-$b/python" timeout 200 "$py" bench/showdown/showdown.py --workers "$w" --steps "${STEPS:-300}" \
        --repeats 1 --variants "${VARIANTS:-ac}" --out "$d" ${SHOWDOWN_ARGS:-} > "$d/log.txt" 2>&1
      echo "round $round $b W=$w rc=$? $(date -u +%H:%M:%S)"
      grep -E "overhead p50" "$d/log.txt" | sed "s/^/  [$b r$round W=$w] /"
    done
  done
done
uname -a > "$out/machine.txt"; nproc >> "$out/machine.txt"
