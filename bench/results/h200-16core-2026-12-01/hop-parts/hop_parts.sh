#!/usr/bin/env bash
# Experiment (not a product change): what the core hop's ~0.3 us above the floor is made of. Builds
# variants of the ring that drop one cost each (UNSAFE: the wake protocol needs the exchange and the
# bit loads) and runs the strategies bench on each, alternated.
set -u
opts="-DRINGCAST_BUILD_PYTHON=OFF -DRINGCAST_BUILD_TESTS=OFF -DRINGCAST_BENCH_ZMQ=OFF"
mk() {  # name, sed edits on wait.hpp, sed edits on ring_inl.hpp
  local v=$1; rm -rf /tmp/src-$v; mkdir -p /tmp/src-$v; tar --exclude=./build --exclude=./.old --exclude=./bench/results -cf - . | tar xf - -C /tmp/src-$v
  [ -n "$2" ] && sed -i "$2" /tmp/src-$v/include/ringcast/wait.hpp
  [ -n "$3" ] && sed -i "$3" /tmp/src-$v/include/ringcast/detail/ring_inl.hpp
  (cmake -S /tmp/src-$v -B /tmp/b-$v $opts >/tmp/c-$v.log 2>&1 && cmake --build /tmp/b-$v -j4 --target ringcast_bench >>/tmp/c-$v.log 2>&1 || { echo "BUILD $v FAILED"; tail -5 /tmp/c-$v.log; })
}
X='s/cursor.exchange(value, std::memory_order_seq_cst);/cursor.store(value, std::memory_order_release);/'
B='s/    return notify_sleepers(site, wake_calls);/    (void)site; (void)wake_calls; return false;/'
C='s/    counter.store(counter.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);/    (void)counter;/'
mk base "" "" &
mk xchg "$X" "" &
mk bits "$B" "" &
mk count "" "$C" &
wait
mk all "$X;$B" "$C"
echo "built $(date +%T)"
for i in 1 2; do for v in base xchg bits count all; do
  [ -x /tmp/b-$v/bench/ringcast-bench ] || continue
  f=$OUT/hop-$v-$i.txt
  timeout 100 /tmp/b-$v/bench/ringcast-bench strategies --readers 2 --pin > $f 2>&1
  echo "== $v run $i $(date +%T): $(grep -E '^(spin|hybrid|floor_atomic) ' $f | awk '{printf "%s %s  ", $1, $2}')"
done; done
