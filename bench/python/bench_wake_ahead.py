#!/usr/bin/env python3
"""Wake-ahead on and off, alternated in one process: how soon sleeping workers have a step's request.

One writer (the executor) and --workers reader processes (the workers). The executor sends the
showdown's ~2 KB request, then busy-waits a gap (--gap-ms, scaled per message by 0.3..1.7 with
--jitter, so that the adaptive wait cannot predict it) before the next: a gap longer than the
readers' spin cap makes them sleep in the kernel (the queue is made with spin_max_us=2000, the cap
these gaps were chosen for; MessageQueue's default is 5 ms on a machine with a CPU per process), as workers do between the steps of a model whose
step (or the executor's turnaround) takes milliseconds. Per message: from the executor's enqueue
call to the last worker's return from dequeue (the request pickled, published, each worker woken,
copied and unpickled; CLOCK_MONOTONIC in every process), and the workers' kernel sleeps per message.
MessageQueue(wake_ahead=True) (the default) wakes sleeping workers before it pickles the request, so
their wake-up runs while it is pickled; wake_ahead=False wakes them by the publish alone. The rounds
alternate the two; each round's p50 and p90 are printed (the first tenth of each run left out).

    PYTHONPATH=<build>/python python3 bench/python/bench_wake_ahead.py [--workers 2] [--gap-ms 3]
        [--jitter] [--messages 300] [--rounds 3]
"""
import argparse
import mmap
import os
import pickle
import platform
import statistics
import struct
import sys
import time

import ringcast

from bench_glue import STEP as REQUEST  # ~2 KB pickled, shaped like a scheduler output (the showdown's too)


def gap_of(i, gap_s, jitter):
    # A fixed pseudo-random spread (the same in every run): 0.3..1.7 x the gap.
    return gap_s * (0.3 + 1.4 * ((i * 7919) % 101) / 100) if jitter else gap_s


def one_run(workers, messages, gap_s, jitter, wake_ahead):
    q = ringcast.MessageQueue(workers, workers, max_chunk_bytes=1 << 16, max_chunks=8, wake_ahead=wake_ahead,
                              spin_max_us=2000.0)
    stamps = mmap.mmap(-1, 8 * messages * workers)
    sleeps = mmap.mmap(-1, 8 * workers)
    pids = []
    for rank in range(workers):
        pid = os.fork()
        if pid == 0:
            try:
                r = ringcast.MessageQueue.create_from_handle(q.export_handle(), rank)
                for i in range(messages):
                    r.dequeue(timeout=60)
                    struct.pack_into("q", stamps, 8 * (i * workers + rank), time.monotonic_ns())
                struct.pack_into("q", sleeps, 8 * rank, r._reader.waits)
            finally:
                os._exit(0)
        pids.append(pid)
    q.wait_until_ready(30)
    sent = []
    for i in range(messages):
        end = time.monotonic() + gap_of(i, gap_s, jitter)
        while time.monotonic() < end:  # the executor is busy between steps: it holds its CPU
            pass
        request = dict(REQUEST, step=i)
        sent.append(time.monotonic_ns())
        q.enqueue(request, timeout=60)
    for pid in pids:
        _, status = os.waitpid(pid, 0)
        if status != 0:
            raise RuntimeError(f"worker exited with status {status}")
    q.shutdown()
    skip = messages // 10
    took = [(max(struct.unpack_from("q", stamps, 8 * (i * workers + r))[0] for r in range(workers)) - sent[i]) / 1e3
            for i in range(skip, messages)]
    slept = statistics.median(struct.unpack_from("q", sleeps, 8 * r)[0] for r in range(workers)) / messages
    return statistics.median(took), statistics.quantiles(took, n=10)[8], slept


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--gap-ms", type=float, default=3.0)
    ap.add_argument("--jitter", action="store_true", help="spread the gaps over 0.3..1.7 x --gap-ms")
    ap.add_argument("--messages", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    if a.messages < 20:
        ap.error("--messages must be at least 20 (the first tenth is warm-up)")
    t = []
    for _ in range(200):
        t0 = time.perf_counter_ns()
        pickle.dumps(dict(REQUEST, step=1), protocol=5)
        t.append(time.perf_counter_ns() - t0)
    print(f"wake-ahead A/B: 1 executor + {a.workers} worker process(es), {a.messages} messages x {a.rounds} rounds, "
          f"gap {a.gap_ms} ms{' (x 0.3..1.7)' if a.jitter else ''}; the request pickles in {statistics.median(t) / 1e3:.1f} us "
          f"(p50, alone); {os.cpu_count()} CPUs, Python {platform.python_version()}")
    print("enqueue call -> last worker returned from dequeue, us (p50 / p90), and kernel sleeps per message of a worker")
    results = {True: [], False: []}
    for rnd in range(a.rounds):
        for on in ((False, True) if rnd % 2 == 0 else (True, False)):  # alternate which goes first
            p50, p90, slept = one_run(a.workers, a.messages, a.gap_ms / 1e3, a.jitter, on)
            results[on].append(p50)
            print(f"  round {rnd + 1} wake_ahead={on!s:<5}  {p50:8.1f} / {p90:8.1f}   sleeps/message {slept:.2f}",
                  flush=True)
    off, on = statistics.median(results[False]), statistics.median(results[True])
    print(f"median of the rounds' p50: off {off:.1f} us, on {on:.1f} us: on - off = {on - off:+.1f} us "
          f"(rounds: off {' '.join(f'{v:.1f}' for v in results[False])}; on {' '.join(f'{v:.1f}' for v in results[True])})")


if __name__ == "__main__":
    main()
