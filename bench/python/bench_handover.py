#!/usr/bin/env python3
"""What a transport can take off a synchronous Python step: the showdown's (a) spin+yield and (c) ringcast
transports, alternated in one run, without the step's work.

A sync step is: the executor pickles and enqueues the request, every worker receives and unpickles it,
works, pickles and sends its reply, the executor collects and unpickles the replies. Both transports
pickle the same objects with the same CPython; what a transport changes is the rest: the calls around
the copies, the copies, and the hand-overs between the processes. This bench measures:

  1. round trips at zero work, executor -> W workers -> executor, in lock step, every rank replying (the
     all-rank step) and rank 0 alone (the single-rank step), with
       - the showdown's request (a scheduler output, ~1.6 KB pickled) and reply (a tuple, ~50 B): the
         step's overhead without its work, what the showdown's sync target compares;
       - a tiny request and reply (a one-key dict, a one-element tuple): the same calls and hand-overs
         with almost no pickling;
  2. in one process, each transport's enqueue and dequeue of the showdown's request against
     pickle.dumps / pickle.loads of it, interleaved call by call (no hand-over: the calls' own Python),
     and pickle.loads of one reply (what an all-rank step's executor pays once more per further rank).

The variants alternate round by round (a, c, c, a, ...) and every round is printed. The summary states,
per mode, the sync target as measured with the showdown's payloads, then an estimate of the transport
alone: what ringcast saves over the spinner with tiny payloads, against the 0.2 x (a) the target asks.
The estimate leaves out what grows with the payload (its copies, its bytes crossing cores, unpickling
them from a cold cache), so it is not a bound. With --cpp-floor-json, a bound: the spinner's step less
its whole tiny-payload round trip is what grows with the payload, which every transport of pickled
objects pays; a transport costing only ringcast's protocol in C++ (the same step's C++ floor) could not
take (c) below that plus the floor. And the aggregation target (all / single <= 1.10) against what an
all-rank step's executor does more: unpickle W - 1 further replies.

    PYTHONPATH=<build>/python python3 bench/python/bench_handover.py [--workers 2] [--rounds 5]
        [--steps 2000] [--calls 3000] [--cpp-floor-json <ringcast-showdown-floor --json output>]
"""
import argparse
import json
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
from showdown import Baseline, RingcastGather, fork_workers, kill_workers, scheduler_output  # noqa: E402
from spin_yield_mq import SpinYieldQueue  # noqa: E402

VARIANTS = {"a": Baseline, "c": RingcastGather}
PAYLOADS = ("showdown", "tiny")
ROUND_LIMIT_S = 120


def order_of(k):
    """The variants' order in round k: a then c, then c then a, and so on."""
    return ("a", "c") if k % 2 == 0 else ("c", "a")


def request(payload, step):
    return scheduler_output(step) if payload == "showdown" else {"step": step}


def reply_obj(payload, step, rank):
    # The showdown's reply: (step, cpu seconds, rank, receive ns, send ns, unpickle ns).
    if payload == "showdown":
        return (step, 0.000123, rank, time.monotonic_ns(), time.monotonic_ns(), 12345)
    return (step,)


def worker(transport, rank, payload, reply_all):
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


class RoundTimedOut(Exception):
    pass


def _alarm(signum, frame):
    raise RoundTimedOut()


def one_round(name, workers, payload, steps, reply_all):
    """p50 round trip (us) of `steps` lock-step rounds after a warm-up, with fresh processes. A round
    that does not end within ROUND_LIMIT_S (a worker died: (a)'s waits have no timeout and would spin
    on) raises, and its workers are killed."""
    transport = VARIANTS[name](workers)
    pids = []
    warmup = max(50, steps // 10)
    # Every request is built before the clock runs: a step's input exists before its step.
    requests = [request(payload, step) for step in range(warmup + steps)]
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(ROUND_LIMIT_S)
    try:
        fork_workers(pids, workers, lambda rank: worker(transport, rank, payload, reply_all))
        if hasattr(transport, "connect"):
            transport.connect()
        ranks = list(range(workers)) if reply_all else [0]
        times = []
        for step, req in enumerate(requests):
            t0 = time.perf_counter_ns()
            transport.broadcast(req)
            replies = transport.collect(step, ranks)
            t1 = time.perf_counter_ns()
            if len(replies) != len(ranks):
                raise RuntimeError(f"{name}: {len(replies)} replies for {len(ranks)} ranks")
            if step >= warmup:
                times.append(t1 - t0)
        transport.broadcast(None)
        while pids:
            _, status = os.waitpid(pids[0], 0)
            pids.pop(0)
            if os.waitstatus_to_exitcode(status) != 0:
                raise RuntimeError(f"{name}: a worker exited with status {os.waitstatus_to_exitcode(status)}")
        return statistics.median(times) / 1000.0
    except RoundTimedOut:
        raise RuntimeError(f"{name}, {payload} payloads, W={workers}: the round did not end within "
                           f"{ROUND_LIMIT_S} s") from None
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        kill_workers(pids)  # those not reaped above
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
    reply_data = pickle.dumps(reply_obj("showdown", 7, 0), protocol=5)
    keys = ("dumps", "loads", "c enqueue", "c dequeue", "a enqueue", "a dequeue", "reply loads")
    spent = {k: [] for k in keys}
    now = time.perf_counter_ns
    try:
        for _ in range(calls):
            t0 = now(); pickle.dumps(obj, protocol=5); t1 = now(); pickle.loads(data); t2 = now()  # noqa: E702
            q.enqueue(obj); t3 = now(); r.dequeue(); t4 = now()  # noqa: E702
            s.enqueue(obj); t5 = now(); sr.dequeue(); t6 = now()  # noqa: E702
            pickle.loads(reply_data); t7 = now()  # noqa: E702
            for k, a, b in zip(keys, (t0, t1, t2, t3, t4, t5, t6), (t1, t2, t3, t4, t5, t6, t7)):
                spent[k].append(b - a)
    finally:
        r.shutdown()
        q.shutdown()
        sr.close()
        s.close()
    return {k: statistics.median(v) / 1000.0 for k, v in spent.items()}


def cpp_floors(ap, path, workers):
    """{"single": us, "all": us}: the overhead p50 of the gather doorbell's rows of a floor JSON of W workers."""
    try:
        with open(path) as f:
            data = json.load(f)
        if data["workers"] != workers:
            ap.error(f"--cpp-floor-json: {path} is of W={data['workers']}, this run W={workers}")
        return {row["replies"]: float(row["overhead_p50_us"]) for row in data["rows"]
                if row["collect"] == "gather doorbell"}
    except (OSError, ValueError, KeyError, TypeError) as e:
        ap.error(f"--cpp-floor-json: cannot read a floor from {path}: {e!r}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5, help="rounds per variant, payload and mode (alternated)")
    ap.add_argument("--steps", type=int, default=2000, help="round trips per round")
    ap.add_argument("--calls", type=int, default=3000, help="calls per glue run (3 runs)")
    ap.add_argument("--cpp-floor-json", metavar="PATH",
                    help="the same W's C++ floor (ringcast-showdown-floor --json): adds, per mode, the bound on "
                         "(c)/(a) of a transport that costs nothing but that floor")
    a = ap.parse_args()
    if a.workers < 1 or a.rounds < 1 or a.steps < 1 or a.calls < 1:
        ap.error("--workers, --rounds, --steps and --calls must be >= 1")
    floors = cpp_floors(ap, a.cpp_floor_json, a.workers) if a.cpp_floor_json else {}
    modes = ("all", "single") if a.workers > 1 else ("single",)
    print(f"bench_handover: W={a.workers}, {' and '.join(m + '-rank' for m in modes)} replies, {a.rounds} rounds x "
          f"{a.steps} round trips per variant, payload and mode, zero work; {os.cpu_count()} CPUs, "
          f"Python {platform.python_version()}, {time.strftime('%Y-%m-%d %H:%M:%S')}")
    rtt = {(m, v, p): [] for m in modes for v in VARIANTS for p in PAYLOADS}
    for k in range(a.rounds):
        order = order_of(k)
        for m in modes:
            for p in PAYLOADS:
                for v in order:
                    rtt[(m, v, p)].append(one_round(v, a.workers, p, a.steps, m == "all"))
    print("\nround trip p50, us (round 1..N; median); the variants' order in rounds 1..N: "
          + " ".join("".join(order_of(k)) for k in range(a.rounds)))
    med = {}
    for m in modes:
        for p in PAYLOADS:
            for v in VARIANTS:
                med[(m, v, p)] = statistics.median(rtt[(m, v, p)])
                print(f"  {m:6s} ({v}) {p:8s} " + " ".join(f"{x:7.1f}" for x in rtt[(m, v, p)]) +
                      f"   median {med[(m, v, p)]:7.1f}")
        for p in PAYLOADS:
            ratios = [c / x for c, x in zip(rtt[(m, "c", p)], rtt[(m, "a", p)])]
            print(f"  {m:6s} (c)/(a) {p:8s} " + " ".join(f"{x:7.2f}" for x in ratios) +
                  f"   median {statistics.median(ratios):.2f}")

    runs = [glue(a.calls) for _ in range(3)]
    print(f"\none process, interleaved call by call, {a.calls} calls x 3 runs, p50 us (run 1..3)")
    for k in runs[0]:
        print(f"  {k:11s} " + " ".join(f"{r[k]:6.2f}" for r in runs))
    g = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    glue_a = g["a enqueue"] - g["dumps"] + g["a dequeue"] - g["loads"]
    glue_c = g["c enqueue"] - g["dumps"] + g["c dequeue"] - g["loads"]
    print(f"  beyond the pickling (medians): (a) enqueue + dequeue {glue_a:.2f} us, (c) {glue_c:.2f} us")

    print()
    for m in modes:
        a_step, c_step = med[(m, "a", "showdown")], med[(m, "c", "showdown")]
        a_tiny, c_tiny = med[(m, "a", "tiny")], med[(m, "c", "tiny")]
        ratio = statistics.median(c / x for c, x in zip(rtt[(m, "c", "showdown")], rtt[(m, "a", "showdown")]))
        ask, saving = 0.2 * a_step, a_tiny - c_tiny
        print(f"{m}-rank, the sync target (c) <= 0.8 x (a) with the showdown's payloads at zero work: (c)/(a) "
              f"{ratio:.2f} (the rounds' median; medians {c_step:.1f} / {a_step:.1f} us): "
              + ("met" if ratio <= 0.8 else "missed") + ".")
        print(f"  the transport alone, estimated with tiny payloads (what grows with the payload is left out: its "
              f"copies, its bytes crossing cores, unpickling them from a cold cache): ringcast saves "
              f"{saving:.1f} us per round trip ({a_tiny:.1f} - {c_tiny:.1f}) where the target asks 0.2 x (a) = "
              f"{ask:.1f} us; " + ("as much" if saving >= ask else f"{ask - saving:.1f} us short") +
              f". The calls' own Python (one process, the showdown's request): (c) {glue_c - glue_a:+.2f} us "
              f"per enqueue + dequeue against (a)")
        if m in floors:
            # The spinner's step less its whole tiny-payload round trip (its four calls, their Python and
            # its hand-overs) is what grows with the payload — the pickling, the copies, the bytes crossing
            # cores — which every transport of pickled objects pays as the spinner does. A transport with no
            # cost of its own but the protocol's in C++ (no Python call, no tiny pickling: generous to it)
            # takes at least that plus the floor: a lower bound on (c), so on the ratio.
            payload_part, floor = a_step - a_tiny, floors[m]
            bound = (payload_part + floor) / a_step
            print(f"  a transport that cost nothing but the C++ floor ({floor:.1f} us, the same step in C++): "
                  f"{payload_part:.1f} + {floor:.1f} us at least (the spinner's step less its tiny-payload round "
                  f"trip), (c)/(a) >= {bound:.2f}: 0.8 x (a) "
                  + ("out of reach at zero work" if bound > 0.8 else "within reach") + ".")
    if "all" in modes:
        # All ranks against one: the executor takes W - 1 more replies, one after another, and unpickles
        # each in Python — a cost of the step that no wait removes. The rest: the slowest of W workers'
        # unpickling of the request and pickling of its reply against one worker's (the largest of W
        # samples of a time that varies); less than nothing where replies were unpickled while others
        # were still awaited (then the further replies' unpickling was not on the step's path).
        c_all, c_single = med[("all", "c", "showdown")], med[("single", "c", "showdown")]
        more = (a.workers - 1) * g["reply loads"]
        transport = med[("all", "c", "tiny")] - med[("single", "c", "tiny")]
        rest = c_all - c_single - transport - more
        replies = "reply" if a.workers == 2 else "replies"
        print(f"aggregation: (c) all / single {c_all / c_single:.2f} ({c_all:.1f} / {c_single:.1f} us; (a) "
              f"{med[('all', 'a', 'showdown')] / med[('single', 'a', 'showdown')]:.2f}); <= 1.10 allows the all-rank "
              f"step {0.1 * c_single:.1f} us more, it takes {c_all - c_single:.1f} us more, of which the transport's "
              f"{transport:.1f} us (tiny payloads), the executor's unpickling of {a.workers - 1} more {replies} "
              f"{more:.1f} us ({g['reply loads']:.2f} us each, in one process), the rest {rest:.1f} us"
              + (" (less than nothing: replies unpickled while others were awaited)" if rest < 0 else ""))


if __name__ == "__main__":
    main()
