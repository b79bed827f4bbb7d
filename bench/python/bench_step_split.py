#!/usr/bin/env python3
"""Where the transport's share of a synchronous step goes, inside ringcast's calls: one executor process and
--workers worker processes (default 1; all of them reply, one collect for all) run the showdown's step (the ~2 KB request, `--work-us` of busy work, a ~100 B reply)
with the library's defaults, and the compiled module stamps fixed points of its one-call paths
(`_core._stamps_enable`; CLOCK_MONOTONIC, comparable across the two processes). Per step:

  enqueue   Python -> module | pickle | copy + publish | module -> Python
  hand-over publish (executor) -> the worker's wait sees the record
  dequeue   copy + release | unpickle | module -> Python           (and Python -> module before it waits)
  reply     Python -> module | pickle | copy + publish | module -> Python
  hand-back publish (worker) -> the executor's collect has every reply
  collect   copy + unpickle | module -> Python
With several workers the worker's parts are those of the critical one (the last to publish its reply),
and "after the last reply" is from that publish to the executor's return from collect: the tail of the
step that the collect's handling of the replies (copies, unpickling, wake-up) adds.

"Python -> module" is from the Python line before the call to the module's first stamp (the method of
ringcast's Python layer, pybind11's argument conversion); "module -> Python" from the last stamp to the
Python line after the call. The step's overhead is its time less the worker's work (from the worker's
return from dequeue to its reply call, which includes making the reply object). Every part is printed as the median over steps, per run.

    PYTHONPATH=<build>/python python3 bench/python/bench_step_split.py [--steps 2000] [--runs 3] [--work-us 1000]
        [--workers 1]
"""
import argparse
import mmap
import os
import platform
import statistics
import struct
import sys
import time

import ringcast
from ringcast import _core

from bench_glue import STEP as REQUEST  # ~2 KB pickled, shaped like a scheduler output (the showdown's too)

NAMES = _core._STAMP_NAMES
IDX = {n: i for i, n in enumerate(NAMES)}
# The worker's per-step record in shared memory: its four Python clock reads and its stamps.
WORKER_FIELDS = ("deq_call", "deq_return", "reply_call", "reply_return") + NAMES
RECORD = struct.Struct(f"{len(WORKER_FIELDS)}q")


def busy(us):
    end = time.monotonic_ns() + int(us * 1000)
    while time.monotonic_ns() < end:
        pass


def worker(handle, ghandle, steps, work_us, shared, rank, workers):
    q = ringcast.MessageQueue.create_from_handle(handle, rank)
    g = ringcast.ReplyGather.create_from_handle(ghandle, rank)
    _core._stamps_enable(True)
    req = None
    for step in range(steps):
        # The last step's request is freed here, not by the assignment below inside the clock reads: a
        # ~2 KB dict's objects took ~1 us to free, which "dequeue: module -> Python" counted as the
        # binding's (1.17-1.31 us on the 2-core VM with it, 0.29 without).
        req = None
        t0 = time.monotonic_ns()
        req = q.dequeue()
        t1 = time.monotonic_ns()
        busy(work_us)
        reply = {"step": req["step"], "tokens": list(range(16)), "rank": rank}  # made before the clock read
        t2 = time.monotonic_ns()
        g.reply(req["step"], reply)
        t3 = time.monotonic_ns()
        RECORD.pack_into(shared, (step * workers + rank) * RECORD.size, t0, t1, t2, t3, *_core._stamps_take())
    os._exit(0)


def one_run(steps, work_us, workers):
    q = ringcast.MessageQueue(workers, workers, max_chunk_bytes=1 << 20, max_chunks=16)
    g = ringcast.ReplyGather(workers)
    shared = mmap.mmap(-1, steps * workers * RECORD.size)
    pids = []
    for rank in range(workers):
        pid = os.fork()
        if pid == 0:
            try:
                worker(q.export_handle(), g.export_handle(), steps, work_us, shared, rank, workers)
            finally:
                os._exit(1)
        pids.append(pid)
    q.wait_until_ready(30)
    _core._stamps_enable(True)
    executor = []
    for step in range(steps):
        request = dict(REQUEST, step=step)
        t0 = time.monotonic_ns()
        q.enqueue(request)
        t1 = time.monotonic_ns()
        replies = g.collect(step, timeout=30)
        t2 = time.monotonic_ns()
        assert [r["step"] for r in replies] == [step] * workers
        executor.append((t0, t1, t2, _core._stamps_take()))
    for pid in pids:
        _, status = os.waitpid(pid, 0)
        if status != 0:
            raise RuntimeError(f"worker exited with status {status}")
    q.shutdown()
    g.close()
    parts = {}
    warm = steps // 10
    for step in range(warm, steps):
        t0, t1, t2, ex = executor[step]
        records = [dict(zip(WORKER_FIELDS, RECORD.unpack_from(shared, (step * workers + r) * RECORD.size)))
                   for r in range(workers)]
        w = max(records, key=lambda x: x["reply_committed"])  # the critical worker: the last reply
        e = {n: ex[IDX[n]] for n in NAMES}
        rows = {
            "enqueue: Python -> module": e["send_enter"] - t0,
            "enqueue: pickle": e["send_pickled"] - e["send_enter"],
            "enqueue: copy + publish": e["send_committed"] - e["send_pickled"],
            "enqueue: module -> Python (off the critical path)": t1 - e["send_committed"],
            "hand-over: publish -> worker sees it": w["recv_seen"] - e["send_committed"],
            "dequeue: copy + release": w["recv_copied"] - w["recv_seen"],
            "dequeue: unpickle": w["recv_unpickled"] - w["recv_copied"],
            "dequeue: module -> Python": w["deq_return"] - w["recv_unpickled"],
            "reply: Python -> module": w["reply_enter"] - w["reply_call"],
            "reply: pickle": w["reply_pickled"] - w["reply_enter"],
            "reply: copy + publish": w["reply_committed"] - w["reply_pickled"],
            "hand-back: publish -> collect has it": e["collect_all_in"] - w["reply_committed"],
            "collect: copy + unpickle": e["collect_unpickled"] - e["collect_all_in"],
            "collect: module -> Python": t2 - e["collect_unpickled"],
            "after the last reply: publish -> collect returned": t2 - w["reply_committed"],
            "overhead (step - work)": (t2 - t0) - (w["reply_call"] - w["deq_return"]),
        }
        for k, v in rows.items():
            parts.setdefault(k, []).append(v / 1000.0)
    return {k: statistics.median(v) for k, v in parts.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--work-us", type=float, default=1000.0)
    ap.add_argument("--workers", type=int, default=1)
    a = ap.parse_args()
    if a.steps < 20:
        ap.error("--steps must be at least 20 (the first tenth is warm-up)")
    runs = [one_run(a.steps, a.work_us, a.workers) for _ in range(a.runs)]
    print(f"one sync step split at the module's stamps: 1 executor + {a.workers} worker process(es), every one "
          f"replying, {a.steps} steps x "
          f"{a.runs} runs (first tenth left out), work {a.work_us:.0f} us, defaults; p50 us per run; "
          f"{os.cpu_count()} CPUs, Python {platform.python_version()}")
    for k in runs[0]:
        print(f"  {k:50s} " + " ".join(f"{r[k]:7.2f}" for r in runs))
    # The critical path: everything but the executor's return from enqueue (the worker is woken
    # meanwhile); its parts add up to the overhead step by step (their medians need not).
    named = [k for k in runs[0]
             if not k.startswith(("overhead", "after the last reply")) and "off the critical path" not in k]
    sums = [sum(r[k] for k in named) for r in runs]
    print(f"  {'sum of the critical path (medians)':50s} " + " ".join(f"{x:7.2f}" for x in sums))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
