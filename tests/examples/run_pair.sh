#!/usr/bin/env bash
# Runs examples/writer.cpp and examples/reader.cpp as two processes on a fresh queue name and checks
# that the reader received all COUNT messages (the reader itself checks their order), that both exit 0
# and that the queue's name is gone afterwards (the reader removes it).
#   run_pair.sh WRITER READER COUNT ORDER     ORDER: reader_first | writer_first | writer_done_first
set -uo pipefail
writer=$1 reader=$2 count=$3 order=$4
queue="rc-example-$$-$order"
tmp=$(mktemp -d)
cleanup() { rm -f "/dev/shm/$queue"; rm -rf "$tmp"; }
trap cleanup EXIT
run() { timeout 60 "$@"; }  # each program: a hang is a failure, not a stuck ctest

case $order in
  reader_first)
    run "$reader" "$queue" >"$tmp/reader.out" 2>&1 & reader_pid=$!
    sleep 0.2  # the queue does not exist yet: the reader is waiting in attach()
    run "$writer" "$queue" "$count" >"$tmp/writer.out" 2>&1; writer_rc=$?
    wait $reader_pid; reader_rc=$? ;;
  writer_first)
    run "$writer" "$queue" "$count" >"$tmp/writer.out" 2>&1 & writer_pid=$!
    run "$reader" "$queue" >"$tmp/reader.out" 2>&1; reader_rc=$?
    wait $writer_pid; writer_rc=$? ;;
  writer_done_first)
    run "$writer" "$queue" "$count" >"$tmp/writer.out" 2>&1; writer_rc=$?
    run "$reader" "$queue" >"$tmp/reader.out" 2>&1; reader_rc=$? ;;
  *) echo "run_pair.sh: unknown order '$order'" >&2; exit 2 ;;
esac

fail=0
check() { if ! eval "$1"; then echo "FAILED: $2"; fail=1; fi; }
check '[ "$writer_rc" -eq 0 ]' "the writer exited with $writer_rc"
check '[ "$reader_rc" -eq 0 ]' "the reader exited with $reader_rc"
check 'grep -qxF "writer: sent $count messages" "$tmp/writer.out"' "the writer did not report $count messages sent"
check 'grep -qxF "reader: received $count messages, the last: message $((count - 1))" "$tmp/reader.out"' \
      "the reader did not receive all $count messages"
check '[ ! -e "/dev/shm/$queue" ]' "the queue's name /dev/shm/$queue is still there"
echo "---- writer ($writer_rc):"; cat "$tmp/writer.out"
echo "---- reader ($reader_rc):"; cat "$tmp/reader.out"
exit $fail
