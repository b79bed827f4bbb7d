#!/usr/bin/env bash
# Call C of 2026-12-06 (08:40): the reply ring's default size and the W=8 all-rank async step, again, with
# more rounds than the A/B of 06:42. The same build, two copies of the Python package that differ only in
# ReplyGather's default max_reply_bytes: new = 256 KiB - 64 (1 MiB rings), old = 256 KiB (2 MiB rings).
# The showdown W=8, variants a c, 1 run of 300 steps per invocation, torch loaded, pinned; the arms
# alternated over 6 rounds (new old / old new / ...).
set -uo pipefail
out=${OUT:-/tmp/out}; work=/tmp/s38c; mkdir -p "$out" "$work"
pack() { date -u > "$work/date.txt"; tar czf "$out/s38c.tgz" -C "$work" . ; }
trap pack EXIT
b=/tmp/b-s38c
date -u > "$work/start.txt"; cp .dev38/build-rev.txt "$work/build.txt"; cp "$0" "$work/"
cmake -S . -B "$b" -DRINGCAST_BUILD_TESTS=OFF -DRINGCAST_BENCH_ZMQ=OFF -DPython_EXECUTABLE="$(command -v python3)" \
  -Dpybind11_DIR="$(python3 -m pybind11 --cmakedir)" > "$work/configure.log" 2>&1
cmake --build "$b" -j16 > "$work/build.log" 2>&1; echo "build rc=$? $(date -u +%T)"
mkdir -p /tmp/py-old /tmp/py-new; cp -r "$b/python/ringcast" /tmp/py-new/; cp -r "$b/python/ringcast" /tmp/py-old/
sed -i 's/^DEFAULT_MAX_REPLY_BYTES = (1 << 18) - 64$/DEFAULT_MAX_REPLY_BYTES = 1 << 18/' /tmp/py-old/ringcast/_gather.py
grep -n "^DEFAULT_MAX_REPLY_BYTES" /tmp/py-old/ringcast/_gather.py /tmp/py-new/ringcast/_gather.py
for round in 1 2 3 4 5 6; do
  order="new old"; [ $((round % 2)) = 0 ] && order="old new"
  for arm in $order; do
    f="$work/r$round-$arm-w8.txt"
    PYTHONPATH=/tmp/py-$arm timeout 100 python3 bench/showdown/showdown.py --workers 8 --steps 300 --repeats 1 --variants ac \
      --import-torch --idle-seconds 0.3 --out "$work/o-r$round-$arm-w8" > "$f" 2>&1
    echo "round $round $arm rc=$? $(date -u +%T) $(grep -E '^\(c\) ' "$f" | head -8 | awk '{printf "%s ", $(NF-6)}')"
  done
done
echo "end $(date -u +%T)"
