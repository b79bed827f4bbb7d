#!/usr/bin/env python3
"""What the other workers do at a step's start, and rank 0's hand-over of the request in Python.

An all-rank sync step of the showdown starts with every worker waiting in its receive; a single-rank
step with some of them still computing. In C++ a broadcast to eight waiting readers costs the ring a
few tenths of a microsecond over one reader (bench/profile/fanout.cpp), yet at W=8 the showdown's
all-rank steps handed the request to rank 0 microseconds later than its single-rank steps did. This
bench isolates the start: the executor enqueues the showdown's request (a MessageQueue with the
library's defaults, the same object as the showdown's) and rank 0 takes it as the showdown's worker
does, while the other W-1 workers, block by block:

  wait    wait in their receive as rank 0 does, and take and unpickle every request as it comes (an
          all-rank step's start)
  busy    run pure-Python work, off the ring (some workers at a single-rank step's start)
  sleep   sleep in time.sleep, off the ring, their CPUs idle (rank 0 alone on the ring and the host)

The busy and sleeping workers take the block's requests afterwards, off the clock. Per step: the
enqueue (the executor's call), and rank 0's hand-over — from the enqueue's return until rank 0 had the
object unpickled (the showdown's "had it"), one CLOCK_MONOTONIC for all processes. Every step waits
for rank 0 (and in a wait block for every rank) and --gap-us more before the next, so that every
waiting worker waits on the ring when the request comes. The modes rotate through the rounds; every
round is printed.

    PYTHONPATH=<build>/python python3 bench/python/bench_fanout.py [--workers 8] [--rounds 6]
        [--steps 1000] [--gap-us 100] [--pin auto|on|off]
"""
import argparse
import mmap
import os
import platform
import signal
import statistics
import struct
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "showdown"))

import ringcast  # noqa: E402
from showdown import fork_workers, kill_workers, scheduler_output  # noqa: E402

MODES = ("wait", "busy", "sleep")
# A block's requests wait in the ring for the workers kept off it: a request pickles to ~1.7 KB and the
# queue's default ring is 16 MiB, so a block of more than ~9000 would block the enqueue for good.
MAX_STEPS = 5000
# The shared words (one anonymous shared mapping, made before the fork), each on a line of its own so
# that one worker's stores do not slow another's: word 0 the block's "done" flag; per rank r, at line
# 1 + r: the step it last took and when it had it. The executor reads the step, then the time; the
# worker stores the time first — ordered for the reader by x86's store order (TSO) alone, which is
# where this bench runs (a weaker CPU could pair a step with the time of the one before).
LINE = 64
DONE = 0


def slot(rank):
    return LINE * (1 + rank)


def order_of(k):
    """The modes' order in round k: each mode in each place in turn."""
    return MODES[k % 3:] + MODES[:k % 3]


def busy_python(n=200):
    """~10 us of pure-Python work: a CPU kept busy without touching the ring."""
    s = 0
    for i in range(n):
        s += i * i
    return s


def worker(rank, handle, shared):
    q = ringcast.MessageQueue.create_from_handle(handle, rank)
    words = memoryview(shared).cast("q")

    def took(step, had):
        words[slot(rank) // 8 + 1] = had
        words[slot(rank) // 8] = step  # the executor polls this word: the time is stored first

    while True:
        msg = q.dequeue()
        had = time.monotonic_ns()
        if msg is None:
            break
        if "block" in msg:  # a block's header: its mode for ranks 1..W-1 (acknowledged, so the block
            took(msg["block"], had)  # starts with every worker where its mode puts it)
            if rank == 0 or msg["mode"] == "wait":
                continue
            while words[DONE] == 0:  # off the ring until the executor says the block is over
                if msg["mode"] == "busy":
                    busy_python()
                else:
                    time.sleep(0.001)
            while True:  # drained off the clock, up to the footer: the ring must not fill
                later = q.dequeue()
                if "footer" in later:
                    took(later["footer"], time.monotonic_ns())
                    break
            continue
        if "footer" in msg:
            took(msg["footer"], had)
            continue
        took(msg["step"], had)
    q.shutdown()
    os._exit(0)


class TimedOut(Exception):
    pass


def block_limit_s(steps, gap_ns):
    """How long a block may take before a worker is taken for dead: generous for a slow machine."""
    return 60 + int((steps + 50) * (gap_ns / 1e9 + 0.005))


def _alarm(signum, frame):
    raise TimedOut()


def wait_for(words, ranks, step):
    for r in ranks:
        while words[slot(r) // 8] != step:
            pass


def run(workers, rounds, steps, gap_ns, cpus):
    limit = block_limit_s(steps, gap_ns)
    """{mode: [(enqueue p50 us, rank 0's hand-over p50 us, the last rank's p50 us or None) per round]}."""
    shared = mmap.mmap(-1, LINE * (workers + 1))
    words = memoryview(shared).cast("q")
    q = ringcast.MessageQueue(workers, workers)
    handle = q.export_handle()
    pids = []
    previous = signal.signal(signal.SIGALRM, _alarm)
    try:
        def body(rank):
            if cpus:
                os.sched_setaffinity(0, {cpus[1 + rank]})
            worker(rank, handle, shared)
        fork_workers(pids, workers, body)
        if cpus:
            os.sched_setaffinity(0, {cpus[0]})
        everyone = list(range(workers))
        requests = [scheduler_output(i) for i in range(steps + 50)]
        marker = 1 << 40  # block headers and footers: steps of their own, above every request's
        out = {m: [] for m in MODES}
        for k in range(rounds):
            for mode in order_of(k):
                signal.alarm(limit)
                marker += 1
                q.enqueue({"block": marker, "mode": mode})
                wait_for(words, everyone, marker)
                waiting = everyone if mode == "wait" else [0]
                enq, had0, last = [], [], []
                for i, req in enumerate(requests):
                    step = (3 * k + MODES.index(mode)) * 10_000_000 + i + 1  # unique over the run
                    req["step"] = step
                    t0 = time.monotonic_ns()
                    q.enqueue(req)
                    t1 = time.monotonic_ns()
                    wait_for(words, waiting, step)
                    if i >= 50:  # the first 50: warm-up
                        enq.append(t1 - t0)
                        had0.append(words[slot(0) // 8 + 1] - t1)
                        if mode == "wait":
                            last.append(max(words[slot(r) // 8 + 1] for r in everyone) - t1)
                    until = time.monotonic_ns() + gap_ns
                    while time.monotonic_ns() < until:
                        pass
                words[DONE] = 1
                marker += 1
                q.enqueue({"footer": marker})
                wait_for(words, everyone, marker)
                words[DONE] = 0
                signal.alarm(0)
                p50 = lambda v: statistics.median(v) / 1000.0  # noqa: E731
                out[mode].append((p50(enq), p50(had0), p50(last) if last else None))
        signal.alarm(limit)
        q.enqueue(None)
        for p in list(pids):
            _, status = os.waitpid(p, 0)
            pids.remove(p)
            if os.waitstatus_to_exitcode(status) != 0:
                raise RuntimeError(f"a worker exited with status {os.waitstatus_to_exitcode(status)}")
        return out
    except TimedOut:
        raise RuntimeError(f"a block did not end within {limit} s (a worker died?)") from None
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        kill_workers(pids)
        q.shutdown()
        words.release()
        shared.close()


def plan_cpus(mode, workers):
    cpus = sorted(os.sched_getaffinity(0))
    if mode == "off" or (mode == "auto" and len(cpus) < workers + 1):
        return None
    if len(cpus) < workers + 1:
        raise SystemExit(f"bench_fanout: --pin on needs {workers + 1} CPUs, this process may use {len(cpus)}")
    return cpus[:workers + 1]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=6, help="rounds; each runs every mode once (a multiple of 3 "
                    "puts each mode in each place equally often)")
    ap.add_argument("--steps", type=int, default=1000, help=f"steps per mode per round, after 50 of warm-up "
                    f"(at most {MAX_STEPS}: a block's requests must fit in the ring)")
    ap.add_argument("--gap-us", type=int, default=100, help="after each step's hand-over, before the next")
    ap.add_argument("--pin", choices=("auto", "on", "off"), default="auto",
                    help="executor on the first allowed CPU, worker r on the (r+2)-th (auto: where there are enough)")
    a = ap.parse_args(argv)
    if a.workers < 2 or a.rounds < 1 or not 1 <= a.steps <= MAX_STEPS or a.gap_us < 0:
        ap.error(f"--workers must be >= 2, --rounds >= 1, --steps 1..{MAX_STEPS}, --gap-us >= 0")
    cpus = plan_cpus(a.pin, a.workers)
    print(f"bench_fanout: W={a.workers}, {a.rounds} rounds x {a.steps} steps per mode, gap {a.gap_us} us, "
          f"{'pinned on CPUs ' + ','.join(map(str, cpus)) if cpus else 'not pinned'}; {os.cpu_count()} CPUs, "
          f"Python {platform.python_version()}, {time.strftime('%Y-%m-%d %H:%M:%S')}")
    out = run(a.workers, a.rounds, a.steps, a.gap_us * 1000, cpus)
    print("p50 us per round: enqueue / rank 0 had it after the enqueue returned [/ the last rank had it]")
    for m in MODES:
        cells = [f"{e:.1f}/{h:.1f}" + (f"/{x:.1f}" if x is not None else "") for e, h, x in out[m]]
        print(f"  {m:<5} " + "  ".join(cells))
    base = statistics.median(h for _, h, _ in out["sleep"])
    print("median of the rounds (rank 0's hand-over against the sleep mode's):")
    for m in MODES:
        e = statistics.median(x[0] for x in out[m])
        h = statistics.median(x[1] for x in out[m])
        last = [x[2] for x in out[m] if x[2] is not None]
        tail = f", the last rank {statistics.median(last):.1f}" if last else ""
        print(f"  {m:<5} enqueue {e:.1f} us, rank 0 had it {h:.1f} us ({h - base:+.1f}){tail}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
