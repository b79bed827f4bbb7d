#!/usr/bin/env python3
"""The floor under the showdown's idle-CPU columns: what a Python process that only sleeps costs on
this machine, with no queue open and with the showdown executor's endpoints open (a MessageQueue writer
and a ReplyGather), each reading the process's CPU over one sleep of SECONDS (every thread, schedstat:
the showdown's own measure). With --import-torch, torch is loaded first, as the showdown's
--import-torch loads it in every process (its threads are part of what an idle process costs).

    PYTHONPATH=build/python python3 bench/showdown/idle_floor.py [--queue] [--import-torch] [--readings 20]

Prints each reading as % of one CPU; a reading over 0.1 % also gives each thread's µs, so a thread that
woke can be named.
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from showdown import thread_cpu_ns  # noqa: E402  (the showdown's own per-thread CPU reading)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queue", action="store_true", help="open a MessageQueue writer and a ReplyGather first")
    ap.add_argument("--import-torch", action="store_true", help="load torch first (and run one op)")
    ap.add_argument("--readings", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=1.0, help="length of one reading's sleep")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if args.readings < 1 or not args.seconds > 0:
        ap.error("--readings and --seconds must be positive")
    if args.import_torch:
        import torch
        torch.zeros(1) + 1  # its lazy start-up done before the first reading
    import ringcast
    endpoints = []  # kept open (referenced) until the end
    if args.queue:
        endpoints = [ringcast.MessageQueue(2, 2, max_chunk_bytes=1 << 20, max_chunks=16), ringcast.ReplyGather(2)]
    label = "ringcast" if args.queue else "plain"
    me = os.getpid()
    print(label, "threads", len(thread_cpu_ns(me)))
    readings = []
    for i in range(args.readings):
        time.sleep(0.01)
        before = thread_cpu_ns(me)
        t0 = time.perf_counter()
        time.sleep(args.seconds)
        after = thread_cpu_ns(me)
        wall = time.perf_counter() - t0
        pct = sum(after[t] - before.get(t, 0) for t in after) / 1e9 / wall * 100
        readings.append(round(pct, 3))
        if pct > 0.1:
            print("  reading", i, "per thread us:", {t: (after[t] - before.get(t, 0)) // 1000 for t in after})
    print(label, "idle CPU % per second:", readings)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"queue": args.queue, "torch": args.import_torch, "seconds": args.seconds,
                       "idle_cpu_pct": readings}, f)
    del endpoints


if __name__ == "__main__":
    main()
