#!/usr/bin/env bash
# Experiment: what the Dekker exchange of publish_and_notify costs a hop. A: the tree as is; B: the
# tree with w1 a plain release store (correct for spin only: no sleeper). Alternated A B A B A B.
set -uo pipefail
out=$OUT/s21a; mkdir -p "$out"
date -u > "$out/start.txt"; cat .old/build-rev.txt > "$out/build.txt"; nproc >> "$out/build.txt"
rm -rf /tmp/treeB; mkdir -p /tmp/treeB
tar --exclude=./build --exclude=./.old --exclude=./bench/results -cf - . | tar -C /tmp/treeB -xf -
sed -i 's/cursor.exchange(value, std::memory_order_seq_cst);  \/\/ w1/cursor.store(value, std::memory_order_release);  \/\/ w1/' /tmp/treeB/include/ringcast/wait.hpp
grep -n "w1 (also" /tmp/treeB/include/ringcast/wait.hpp > "$out/patchB.txt"
for t in A B; do
  src=.; [ $t = B ] && src=/tmp/treeB
  cmake -S $src -B /tmp/b$t -DCMAKE_BUILD_TYPE=Release -DRINGCAST_BUILD_PYTHON=OFF -DRINGCAST_BUILD_TESTS=OFF -DRINGCAST_BENCH_ZMQ=OFF > "$out/cfg$t.log" 2>&1
  cmake --build /tmp/b$t -j16 --target ringcast_bench > "$out/build$t.log" 2>&1 || { tail -30 "$out/build$t.log"; exit 1; }
done
for i in 1 2 3; do
  for t in A B; do
    /tmp/b$t/bench/ringcast-bench hop --pin --rounds 7 > "$out/hop-$t-$i.txt" 2>/dev/null
    echo "== $t $i"; tail -7 "$out/hop-$t-$i.txt"
  done
done
date -u > "$out/end.txt"
