#!/usr/bin/env bash
# Call C of 2026-12-06 (session 37): did the 1 MiB default reply ring (a2e5f34) change the step? The same
# build, two copies of the Python package that differ only in ReplyGather's default max_reply_bytes:
# new = 256 KiB - 64 (1 MiB rings), old = 256 KiB (2 MiB rings). The showdown W=8 and W=2, variants a c,
# 1 run of 300 steps per invocation, torch loaded, pinned; old and new alternated, 3 rounds (order
# new, old / old, new / new, old).
set -uo pipefail
out=${OUT:-/tmp/out}; work=/tmp/s37c; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/s37c.tgz" -C "$work" . ; }
trap pack EXIT
b=/tmp/b-s37c
date -u > "$work/start.txt"; cp .dev37/build-rev.txt "$work/build.txt"; cp "$0" "$work/"
cmake -S . -B "$b" -DRINGCAST_BUILD_TESTS=OFF -DRINGCAST_BENCH_ZMQ=OFF -DPython_EXECUTABLE="$(command -v python3)" \
  -Dpybind11_DIR="$(python3 -m pybind11 --cmakedir)" > "$work/configure.log" 2>&1
cmake --build "$b" -j16 > "$work/build.log" 2>&1; echo "build rc=$? $(date -u +%T)"
mkdir -p /tmp/py-old /tmp/py-new; cp -r "$b/python/ringcast" /tmp/py-new/; cp -r "$b/python/ringcast" /tmp/py-old/
sed -i 's/^DEFAULT_MAX_REPLY_BYTES = (1 << 18) - 64$/DEFAULT_MAX_REPLY_BYTES = 1 << 18/' /tmp/py-old/ringcast/_gather.py
grep -n "^DEFAULT_MAX_REPLY_BYTES" /tmp/py-old/ringcast/_gather.py /tmp/py-new/ringcast/_gather.py
for round in 1 2 3; do
  order="new old"; [ "$round" = 2 ] && order="old new"
  for arm in $order; do
    for w in 8 2; do
      f="$work/r$round-$arm-w$w.txt"
      PYTHONPATH=/tmp/py-$arm timeout 120 python3 bench/showdown/showdown.py --workers $w --steps 300 --repeats 1 --variants ac \
        --import-torch --idle-seconds 0.3 --out "$work/o-r$round-$arm-w$w" > "$f" 2>&1
      echo "round $round $arm W=$w rc=$? $(date -u +%T)"
      grep -E "^\((a|c)\) " "$f" | head -8 | cut -c1-86
    done
  done
done
echo "end $(date -u +%T)"
