#!/usr/bin/env python3
"""What an all-rank collect pays per further rank, once every reply is in: the async step's tail.

In async scheduling the executor collects after its preparation, when every worker's reply already
waits in its ring; an all-rank step then copies and unpickles W - 1 more replies than a single-rank
one. This bench times collect() alone on replies that are in before it starts: one rank, then all W,
the workers replying from another process (pinned to another CPU where there is one, so the reply
lines cross cores as in a step), and pickle.loads of the same reply W times in this process. The
difference per further rank, less its unpickling, is what ringcast adds per reply; the unpickling is
what any transport of pickled replies pays (the showdown's Python floor counts it).

Every round is printed (p50 of --n collects each); the rounds alternate nothing (one variant).
    PYTHONPATH=<build>/python python3 bench/python/bench_collect_width.py [--workers 8] [--n 3000] [--rounds 3]
"""
import argparse
import os
import pickle
import platform
import statistics
import time

import ringcast

REPLY = (1, 0.001, 0)  # the showdown's reply: (step, work seconds, rank)


def spin(us):
    end = time.perf_counter() + us / 1e6
    while time.perf_counter() < end:
        pass


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--n", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    if a.workers < 2:
        ap.error("--workers must be >= 2")
    cpus = sorted(os.sched_getaffinity(0))
    g = ringcast.ReplyGather(a.workers)
    q = ringcast.MessageQueue(1, 1)
    gh, qh = g.export_handle(), q.export_handle()
    pid = os.fork()
    if pid == 0:  # every worker rank in one process: it replies to each request with every rank asked
        code = 1
        try:
            if len(cpus) > 1:
                os.sched_setaffinity(0, {cpus[1]})
            workers = [ringcast.ReplyGather.create_from_handle(gh, r) for r in range(a.workers)]
            requests = ringcast.MessageQueue.create_from_handle(qh, 0)
            while True:
                tag, n_ranks = requests.dequeue()
                if tag < 0:
                    break
                for r in range(n_ranks):
                    workers[r].reply(tag, REPLY)
            code = 0
        finally:
            os._exit(code)
    if len(cpus) > 1:
        os.sched_setaffinity(0, {cpus[0]})
    q.wait_until_ready(timeout=30)
    tag = 0

    def collect_p50(n_ranks):
        nonlocal tag
        ranks = list(range(n_ranks)) if n_ranks > 1 else 0
        times = []
        for _ in range(a.n):
            tag += 1
            q.enqueue((tag, n_ranks))
            spin(300)  # the replies are in before the collect starts (the worker needs ~20 us)
            t0 = time.perf_counter_ns()
            g.collect(tag, ranks, timeout=5)
            times.append(time.perf_counter_ns() - t0)
        return statistics.median(times) / 1e3

    data = pickle.dumps(REPLY, protocol=5)

    def loads_p50():
        times = []
        for _ in range(a.n):
            t0 = time.perf_counter_ns()
            for _ in range(a.workers):
                pickle.loads(data)
            times.append(time.perf_counter_ns() - t0)
        return statistics.median(times) / 1e3 / a.workers

    print(f"collect of replies already in, W={a.workers}, {a.n} collects per figure, p50 us; "
          f"{len(cpus)} CPUs (workers {'on another CPU' if len(cpus) > 1 else 'on the same CPU'}), "
          f"Python {platform.python_version()}")
    print("round  1 rank  W ranks  per further rank  of it pickle.loads  ringcast's own")
    try:
        for rnd in range(1, a.rounds + 1):
            one, every, loads = collect_p50(1), collect_p50(a.workers), loads_p50()
            per_rank = (every - one) / (a.workers - 1)
            print(f"{rnd:5d}  {one:6.2f}  {every:7.2f}  {per_rank:16.3f}  {loads:17.3f}  {per_rank - loads:14.3f}",
                  flush=True)
    finally:
        q.enqueue((-1, 0))
        os.waitpid(pid, 0)
        q.shutdown()
        g.close()


if __name__ == "__main__":
    main()
