#!/usr/bin/env python3
"""1 writer -> W reader processes through ringcast.MessageQueue: enqueue->dequeue latency and CPU.

The writer stamps each object with time.monotonic_ns() (CLOCK_MONOTONIC, one clock for all processes)
and sends one every --period seconds (readers are idle in between, so each message pays a real wake-up);
each reader records now - stamp after dequeue returns the rebuilt object. Objects: a dict with a numpy
uint8 array (bytes without numpy) of 64 B, 4 KiB, 1 MiB. CPU% = process CPU time / wall time over the run.
Usage: PYTHONPATH=<build>/python python3 bench/python/bench_mq.py [--readers 1 3] [--count 2000]
"""
import argparse
import multiprocessing as mp
import os
import platform
import statistics
import time

try:
    import numpy as np
except ImportError:
    np = None

import ringcast

SIZES = [("64 B", 64), ("4 KiB", 4096), ("1 MiB", 1 << 20)]


def reader(handle, rank, count, results):
    q = ringcast.MessageQueue.create_from_handle(handle, rank)
    q.wait_until_ready()
    lat = []
    w0, c0 = time.perf_counter(), time.process_time()
    for _ in range(count):
        obj = q.dequeue(timeout=60)
        lat.append(time.monotonic_ns() - obj["t"])
    cpu = 100.0 * (time.process_time() - c0) / (time.perf_counter() - w0)
    results.put((rank, lat, cpu))


def percentile(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100.0 * len(xs)))]


def run(n_readers, size, count, period, warmup):
    ctx = mp.get_context("fork")
    q = ringcast.MessageQueue(n_readers, n_readers, max_chunk_bytes=2 << 20, max_chunks=4)
    results = ctx.Queue()
    procs = [ctx.Process(target=reader, args=(q.export_handle(), r, count + warmup, results))
             for r in range(n_readers)]
    for p in procs:
        p.start()
    q.wait_until_ready(timeout=60)
    payload = np.zeros(size, dtype=np.uint8) if np is not None else b"\0" * size
    w0, c0 = time.perf_counter(), time.process_time()
    nxt = time.monotonic()
    for i in range(count + warmup):
        q.enqueue({"t": time.monotonic_ns(), "i": i, "data": payload})
        nxt += period
        delay = nxt - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    writer_cpu = 100.0 * (time.process_time() - c0) / (time.perf_counter() - w0)
    out = [results.get(timeout=120) for _ in procs]
    for p in procs:
        p.join()
    q.shutdown()
    lat = [x for _, l, _ in out for x in l[warmup:]]
    return lat, writer_cpu, [c for _, _, c in out]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--readers", type=int, nargs="+", default=[1, 3])
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--period", type=float, default=0.0005, help="seconds between messages")
    ap.add_argument("--runs", type=int, default=1)
    args = ap.parse_args()
    print(f"# bench_mq: {platform.node()} {os.cpu_count()} cpus, Python {platform.python_version()}, "
          f"numpy {'yes' if np is not None else 'no'}, {time.strftime('%Y-%m-%d %H:%M')}, "
          f"{args.runs} run(s) x {args.count} messages per reader, one every {args.period * 1e3:g} ms")
    print("| readers | object | p50 µs | p99 µs | writer CPU% | reader CPU% (each) |")
    print("|---|---|---|---|---|---|")
    for w in args.readers:
        for label, size in SIZES:
            p50s, p99s, wcpu, rcpu = [], [], [], []
            for _ in range(args.runs):
                lat, wc, rc = run(w, size, args.count, args.period, warmup=50)
                p50s.append(statistics.median(lat) / 1e3)
                p99s.append(percentile(lat, 99) / 1e3)
                wcpu.append(wc)
                rcpu += rc
            print(f"| {w} | {label} | {statistics.median(p50s):.1f} | {statistics.median(p99s):.1f} | "
                  f"{statistics.median(wcpu):.1f} | {statistics.median(rcpu):.1f} |", flush=True)


if __name__ == "__main__":
    main()
