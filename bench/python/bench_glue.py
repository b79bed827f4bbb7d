#!/usr/bin/env python3
"""Where a Python step's transport time goes, per call, in one process: the pickling every queue pays
against what ringcast's Python calls add around it (the executor showdown's ~2 KB scheduler-output
dict and a ~100 B reply). No process switch, no wake-up: what is left is the binding's own path.

Per operation, each measured over --n calls and --runs runs (every run printed, p50 of per-call times):
  pickle.dumps / pickle.loads                  the floor every transport pays
  enqueue / dequeue                            MessageQueue, one message at a time (the reader keeps up)
  _writer.send / _reader.recv of pre-pickled   the compiled calls alone (no pickling)
  reply / collect (ReplyGather, 1 rank)        the gather's round trip minus nothing
Glue = enqueue - dumps, dequeue - loads: what the library's Python + C++ path costs per message.
    PYTHONPATH=<build>/python python3 bench/python/bench_glue.py [--n 2000] [--runs 3]
"""
import argparse
import os
import pickle
import platform
import statistics
import time

import ringcast

STEP = {  # ~2 KB pickled, shaped like a scheduler output (the showdown's request)
    "step": 0, "req_ids": [f"req-{i:04d}" for i in range(48)],
    "num_tokens": {f"req-{i:04d}": i % 7 + 1 for i in range(48)},
    "block_tables": [[i * 16 + j for j in range(8)] for i in range(24)],
    "finished": [], "sampling": {"temperature": 0.7, "top_p": 0.95, "seed": None},
}
REPLY = {"step": 0, "tokens": list(range(16)), "rank": 0}


def per_call(fn, n):
    """p50 of per-call times (ns) of fn() over n calls, timed in batches of 10 (timer overhead /10)."""
    times = []
    for _ in range(n // 10):
        t = time.perf_counter_ns()
        for _ in range(10):
            fn()
        times.append((time.perf_counter_ns() - t) / 10)
    return statistics.median(times) / 1000.0


def one_run(n):
    out = {}
    data = pickle.dumps(STEP, protocol=5)
    out["bytes"] = len(data)
    out["dumps"] = per_call(lambda: pickle.dumps(STEP, protocol=5), n)
    out["loads"] = per_call(lambda: pickle.loads(data), n)
    q = ringcast.MessageQueue(1, 1, max_chunk_bytes=1 << 20, max_chunks=16)
    r = ringcast.MessageQueue.create_from_handle(q.export_handle(), 0)
    w, rd = q._writer, r._reader
    try:
        # one enqueue, then its dequeue, each timed on its own (the reader keeps up, as in a step)
        enq, deq = [], []
        for _ in range(n):
            t0 = time.perf_counter_ns()
            q.enqueue(STEP)
            t1 = time.perf_counter_ns()
            r.dequeue()
            t2 = time.perf_counter_ns()
            enq.append(t1 - t0)
            deq.append(t2 - t1)
        out["enqueue"] = statistics.median(enq) / 1000.0
        out["dequeue"] = statistics.median(deq) / 1000.0
        parts = [data]
        out["send+recv (pre-pickled)"] = per_call(lambda: (w.send(parts, None), rd.recv(None)), n)
    finally:
        r.shutdown()
        q.shutdown()
    g = ringcast.ReplyGather(1)
    wk = ringcast.ReplyGather.create_from_handle(g.export_handle(), 0)
    try:
        tag = [0]

        def round_trip():
            tag[0] += 1
            wk.reply(tag[0], REPLY)
            g.collect(tag[0], timeout=5)

        out["reply+collect"] = per_call(round_trip, n)
        rdata = pickle.dumps(REPLY, protocol=5)
        out["reply pickling"] = per_call(lambda: pickle.loads(pickle.dumps(REPLY, protocol=5)), n)
        del rdata
    finally:
        wk.shutdown() if hasattr(wk, "shutdown") else None
        g.shutdown()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    runs = [one_run(a.n) for _ in range(a.runs)]
    print(f"binding glue per call, 1 process, {a.n} calls x {a.runs} runs, p50 us per run; "
          f"{os.cpu_count()} CPUs, Python {platform.python_version()}, {runs[0]['bytes']} B request")
    keys = ["dumps", "loads", "enqueue", "dequeue", "send+recv (pre-pickled)", "reply+collect", "reply pickling"]
    for k in keys:
        print(f"  {k:28s} " + " ".join(f"{r[k]:7.2f}" for r in runs))
    med = {k: statistics.median(r[k] for r in runs) for k in keys}
    print(f"  glue: enqueue - dumps {med['enqueue'] - med['dumps']:.2f} us, dequeue - loads "
          f"{med['dequeue'] - med['loads']:.2f} us, reply+collect - its pickling "
          f"{med['reply+collect'] - med['reply pickling']:.2f} us (medians of runs)")


if __name__ == "__main__":
    main()
