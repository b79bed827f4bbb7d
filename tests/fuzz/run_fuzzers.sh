#!/usr/bin/env bash
# Builds the libFuzzer targets with clang++ (-fsanitize=fuzzer,address,undefined) and runs each for a
# bounded time on a copy of the seed corpus. Exit 0: no crash, no sanitizer report; 77: skipped (no
# clang++ with libFuzzer here); anything else: a finding (the crashing input is kept under WORK/).
#
#   run_fuzzers.sh SOURCE_DIR WORK_DIR [TOTAL_SECONDS=36]
#
# CXX_FUZZ picks the compiler (default: clang++-14, else clang++).
set -euo pipefail
src=${1:?source dir}
work=${2:?work dir}
total=${3:-36}
targets=(fuzz_segment_image fuzz_record fuzz_ownership)
per=$(( total / ${#targets[@]} ))
(( per >= 1 )) || per=1

cxx=${CXX_FUZZ:-}
if [[ -z $cxx ]]; then
  for c in clang++-14 clang++; do
    if command -v "$c" >/dev/null 2>&1; then cxx=$c; break; fi
  done
fi
if [[ -z $cxx ]]; then
  echo "SKIP: no clang++ (apt-get install clang-14 libclang-rt-14-dev)"; exit 77
fi
probe=$(mktemp -d)
# fuzz_record and fuzz_ownership name their segments rc-fuzz-*-<pid>; a crashing run leaves one behind.
trap 'rm -rf "$probe"; rm -f /dev/shm/rc-fuzz-record-* /dev/shm/rc-fuzz-owner-*' EXIT
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' > "$probe/p.cpp"
if ! "$cxx" -fsanitize=fuzzer "$probe/p.cpp" -o "$probe/p" >/dev/null 2>&1; then
  echo "SKIP: $cxx cannot link libFuzzer (install libclang-rt-14-dev)"; exit 77
fi

mkdir -p "$work/obj"
flags=(-std=c++20 -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
       -I "$src/include")
# The library is compiled with the sanitizers (no -fsanitize=fuzzer: only the targets are instrumented
# for coverage... and the library too, so the fuzzer sees its branches).
objs=()
for f in segment ring events/eventfd process; do
  o="$work/obj/${f//\//_}.o"
  "$cxx" "${flags[@]}" -fsanitize=fuzzer-no-link -c "$src/src/$f.cpp" -o "$o"
  objs+=("$o")
done
for t in "${targets[@]}"; do
  "$cxx" "${flags[@]}" -fsanitize=fuzzer "$src/tests/fuzz/$t.cpp" "${objs[@]}" -o "$work/$t"
done

export ASAN_OPTIONS=${ASAN_OPTIONS:-allocator_may_return_null=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
for t in "${targets[@]}"; do
  name=${t#fuzz_}
  corpus="$work/corpus-$name"          # grows; the repo's seeds stay untouched
  mkdir -p "$corpus" "$work/artifacts-$name"
  echo "== $t: ${per}s from $(ls "$src/tests/fuzz/corpus/$name" | wc -l) seeds"
  # -malloc_limit_mb: a legitimate fragmented message may announce up to 1 TiB; ASan returns null
  # beyond what it can map and the target accounts for that (see fuzz_record.cpp).
  # -max_len 70000 -len_control=0: inputs up to a whole ring (fuzz_record: 65536 + 13 bytes) from the
  # first second, not a ramp from short inputs that a time-boxed run would never finish.
  if ! "$work/$t" -max_total_time="$per" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1048576 \
       -max_len=70000 -len_control=0 \
       -print_final_stats=1 -artifact_prefix="$work/artifacts-$name/" \
       "$corpus" "$src/tests/fuzz/corpus/$name" > "$work/$t.log" 2>&1; then
    echo "FINDING in $t (log: $work/$t.log, inputs: $work/artifacts-$name/)"
    tail -40 "$work/$t.log"
    status=1
  else
    grep -E "stat::number_of_executed_units|stat::peak_rss_mb|cov:" "$work/$t.log" | tail -3
  fi
done
exit $status
