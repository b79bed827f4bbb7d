#!/usr/bin/env python3
"""What a transport can take off a synchronous Python step: the showdown's (a) spin+yield and (c) ringcast
transports, alternated in one run, without the step's work.

A sync step is: the executor pickles and enqueues the request, every worker receives and unpickles it,
works, pickles and sends its reply, the executor collects and unpickles the replies. Both transports
pickle the same objects with the same CPython, so of a step's overhead (the step minus its work) a
transport can only change what is not pickling: the calls around the copies and the hand-overs between
the processes. This bench measures exactly that, twice:

  1. round trips at zero work, executor -> W workers -> executor (every rank replies, as the all-rank
     step; single-rank with --single), in lock step, with
       - the showdown's request (~2 KB scheduler output) and reply (a ~100 B tuple): the step's overhead
         without its work, what the showdown's sync target compares;
       - a tiny request and reply (an int): the same calls and hand-overs with almost no pickling;
  2. in one process, each transport's enqueue and dequeue of the showdown's request against
     pickle.dumps / pickle.loads of it, interleaved call by call (no hand-over: the calls' own Python).

The variants alternate round by round (a, c, c, a, ...) and every round is printed. The summary states
what the sync target (c) <= 0.8 x (a) asks of the transport: 0.2 x (a)'s round trip with the showdown's
payloads, against what ringcast's transport saves over the spinner's where pickling is nearly nil:
(a) - (c) with the tiny payloads. When the saving is smaller than what the target asks, no transport
change reaches the target on that machine: the rest of the step is pickling, paid by both alike.

    PYTHONPATH=<build>/python python3 bench/python/bench_handover.py [--workers 2] [--rounds 5]
        [--steps 2000] [--single] [--calls 3000]
"""
import argparse
import ctypes
import os
import pickle
import platform
import signal
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "showdown"))

import ringcast  # noqa: E402
from showdown import Baseline, RingcastGather, scheduler_output  # noqa: E402
from spin_yield_mq import SpinYieldQueue  # noqa: E402

VARIANTS = {"a": Baseline, "c": RingcastGather}
PAYLOADS = ("showdown", "tiny")


def request(payload, step):
    return scheduler_output(step) if payload == "showdown" else {"step": step}


def reply_obj(payload, step, rank):
    # The showdown's reply: (step, cpu seconds, rank, receive ns, send ns, unpickle ns).
    if payload == "showdown":
        return (step, 0.000123, rank, time.monotonic_ns(), time.monotonic_ns(), 12345)
    return (step,)


def worker(transport, rank, payload, reply_all):
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: no orphan spins on
    if os.getppid() == 1:
        os._exit(1)
    recv, reply, cleanup, _ = transport.worker_endpoints(rank)
    while True:
        msg = recv()
        if msg is None:
            break
        if reply_all or rank == 0:
            step = msg["step"]
            reply(step, reply_obj(payload, step, rank))
    cleanup()
    os._exit(0)


def one_round(name, workers, payload, steps, reply_all):
    """p50 round trip (us) of `steps` lock-step rounds after a warm-up, with fresh processes."""
    transport = VARIANTS[name](workers)
    pids = []
    try:
        for rank in range(workers):
            pid = os.fork()
            if pid == 0:
                try:
                    worker(transport, rank, payload, reply_all)
                finally:
                    os._exit(1)
            pids.append(pid)
        if hasattr(transport, "connect"):
            transport.connect()
        ranks = list(range(workers)) if reply_all else [0]
        warmup = max(50, steps // 10)
        times = []
        for step in range(warmup + steps):
            req = request(payload, step)  # built outside the clock: the step's input exists before its step
            t0 = time.perf_counter_ns()
            transport.broadcast(req)
            replies = transport.collect(step, ranks)
            t1 = time.perf_counter_ns()
            if len(replies) != len(ranks):
                raise RuntimeError(f"{name}: {len(replies)} replies for {len(ranks)} ranks")
            if step >= warmup:
                times.append(t1 - t0)
        transport.broadcast(None)
        for pid in pids:
            os.waitpid(pid, 0)
        pids.clear()
        return statistics.median(times) / 1000.0
    finally:
        for pid in pids:  # never leave a spinning worker behind
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except OSError:
                pass
        transport.close()


def glue(calls):
    """In one process, interleaved call by call: dumps, loads, then each transport's enqueue and dequeue
    of the showdown's request. p50 us of each."""
    q = ringcast.MessageQueue(1, 1, max_chunk_bytes=1 << 20, max_chunks=16)
    r = ringcast.MessageQueue.create_from_handle(q.export_handle(), 0)
    s = SpinYieldQueue(1, max_chunk_bytes=1 << 16, max_chunks=10)
    sr = SpinYieldQueue.attach(s.handle(), 0)
    obj = scheduler_output(7)
    data = pickle.dumps(obj, protocol=5)
    keys = ("dumps", "loads", "c enqueue", "c dequeue", "a enqueue", "a dequeue")
    spent = {k: [] for k in keys}
    now = time.perf_counter_ns
    try:
        for _ in range(calls):
            t0 = now(); pickle.dumps(obj, protocol=5); t1 = now(); pickle.loads(data); t2 = now()  # noqa: E702
            q.enqueue(obj); t3 = now(); r.dequeue(); t4 = now()  # noqa: E702
            s.enqueue(obj); t5 = now(); sr.dequeue(); t6 = now()  # noqa: E702
            for k, a, b in zip(keys, (t0, t1, t2, t3, t4, t5), (t1, t2, t3, t4, t5, t6)):
                spent[k].append(b - a)
    finally:
        r.shutdown()
        q.shutdown()
        sr.close()
        s.close()
    return {k: statistics.median(v) / 1000.0 for k, v in spent.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5, help="rounds per variant and payload (alternated)")
    ap.add_argument("--steps", type=int, default=2000, help="round trips per round")
    ap.add_argument("--single", action="store_true", help="only rank 0 replies (default: every rank)")
    ap.add_argument("--calls", type=int, default=3000, help="calls per glue run (3 runs)")
    a = ap.parse_args()
    if a.workers < 1 or a.rounds < 1 or a.steps < 1 or a.calls < 1:
        ap.error("--workers, --rounds, --steps and --calls must be >= 1")
    reply_all = not a.single
    print(f"bench_handover: W={a.workers}, {'all ranks reply' if reply_all else 'rank 0 replies'}, "
          f"{a.rounds} rounds x {a.steps} round trips per variant and payload, zero work; "
          f"{os.cpu_count()} CPUs, Python {platform.python_version()}, {time.strftime('%Y-%m-%d %H:%M:%S')}")
    rtt = {(v, p): [] for v in VARIANTS for p in PAYLOADS}
    for k in range(a.rounds):
        order = ("a", "c") if k % 2 == 0 else ("c", "a")
        for p in PAYLOADS:
            for v in order:
                rtt[(v, p)].append(one_round(v, a.workers, p, a.steps, reply_all))
    print("\nround trip p50, us (round 1..N; median)")
    med = {}
    for p in PAYLOADS:
        for v in VARIANTS:
            med[(v, p)] = statistics.median(rtt[(v, p)])
            print(f"  ({v}) {p:8s} " + " ".join(f"{x:7.1f}" for x in rtt[(v, p)]) + f"   median {med[(v, p)]:7.1f}")
    for p in PAYLOADS:
        ratios = [c / x for c, x in zip(rtt[("c", p)], rtt[("a", p)])]
        print(f"  (c)/(a) {p:8s} " + " ".join(f"{x:7.2f}" for x in ratios) +
              f"   median {statistics.median(ratios):.2f}")

    runs = [glue(a.calls) for _ in range(3)]
    print(f"\none process, interleaved call by call, {a.calls} calls x 3 runs, p50 us (run 1..3)")
    for k in runs[0]:
        print(f"  {k:10s} " + " ".join(f"{r[k]:6.2f}" for r in runs))
    g = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    glue_a = g["a enqueue"] - g["dumps"] + g["a dequeue"] - g["loads"]
    glue_c = g["c enqueue"] - g["dumps"] + g["c dequeue"] - g["loads"]
    print(f"  beyond the pickling (medians): (a) enqueue + dequeue {glue_a:.2f} us, (c) {glue_c:.2f} us")

    ask = 0.2 * med[("a", "showdown")]
    saving = med[("a", "tiny")] - med[("c", "tiny")]
    print(f"\nthe sync target (c) <= 0.8 x (a) asks the transport to save 0.2 x (a) = {ask:.1f} us per step "
          f"((a) {med[('a', 'showdown')]:.1f} us with the showdown's payloads, zero work);")
    print(f"ringcast's transport saves (a) - (c) = {saving:.1f} us per round trip with tiny payloads "
          f"({med[('a', 'tiny')]:.1f} - {med[('c', 'tiny')]:.1f}), the calls' own Python "
          f"{glue_a - glue_c:+.2f} us per request (in one process).")
    print("reachable by the transport: " + ("yes" if saving >= ask else f"no, short by {ask - saving:.1f} us"))


if __name__ == "__main__":
    main()
