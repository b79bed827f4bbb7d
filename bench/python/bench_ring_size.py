#!/usr/bin/env python3
"""Throughput of MessageQueue against the ring's size: how big must the default ring be?

1 writer -> --readers reader processes; the writer enqueues --count numpy arrays of one size back to
back, every reader dequeues them all. Throughput = bytes delivered to one reader / time from the first
enqueue to the last reader's last dequeue. Message sizes 1 MiB and 64 MiB (a message larger than a
quarter of the ring streams through it in fragments), ring sizes 1..128 MiB. Ring sizes run interleaved
in every repeat, so drift on a busy machine hits them all alike; every run's value is printed.
Usage: PYTHONPATH=<build>/python python3 bench/python/bench_ring_size.py [--repeats 3]
"""
import argparse
import multiprocessing as mp
import os
import platform
import statistics
import time

import numpy as np

import ringcast

MiB = 1 << 20


def reader(handle, rank, count, done):
    q = ringcast.MessageQueue.create_from_handle(handle, rank)
    q.wait_until_ready()
    for _ in range(count):
        msg = q.dequeue(timeout=60)
        assert msg.nbytes > 0
    done.put((rank, time.monotonic_ns()))


def one_run(ring_bytes, msg_bytes, count, readers):
    # max_chunk_bytes * max_chunks sizes the ring (MessageQueue's rule); 8 chunks of ring/8.
    q = ringcast.MessageQueue(readers, readers, max_chunk_bytes=ring_bytes // 8, max_chunks=8)
    ctx = mp.get_context("spawn")
    done = ctx.Queue()
    procs = [ctx.Process(target=reader, args=(q.export_handle(), r, count, done)) for r in range(readers)]
    for p in procs:
        p.start()
    q.wait_until_ready()
    payload = np.frombuffer(np.random.default_rng(1).bytes(msg_bytes), dtype=np.uint8)
    t0 = time.monotonic_ns()
    for _ in range(count):
        q.enqueue(payload, timeout=60)
    ends = [done.get(timeout=120)[1] for _ in procs]
    for p in procs:
        p.join()
    q.shutdown()
    return msg_bytes * count / ((max(ends) - t0) / 1e9) / 1e9  # GB/s to each reader


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--readers", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--rings-mib", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64, 128])
    ap.add_argument("--bytes-per-point-mib", type=int, default=1024, help="data sent per (ring, size) point")
    args = ap.parse_args()
    sizes = [(1 * MiB, "1 MiB"), (64 * MiB, "64 MiB")]
    print(f"# {platform.node()} {os.cpu_count()} cpus, readers={args.readers}, repeats={args.repeats}, "
          f"{args.bytes_per_point_mib} MiB per point; GB/s to each reader, every run")
    results = {}
    for rep in range(args.repeats):
        for msg, _ in sizes:
            for ring in args.rings_mib:
                count = max(4, args.bytes_per_point_mib * MiB // msg)
                results.setdefault((msg, ring), []).append(one_run(ring * MiB, msg, count, args.readers))
    for msg, label in sizes:
        best = max(statistics.median(results[(msg, r)]) for r in args.rings_mib)
        print(f"\nmessage {label}")
        print(f"{'ring':>8} {'median GB/s':>12} {'of best':>8}  runs")
        for ring in args.rings_mib:
            runs = results[(msg, ring)]
            med = statistics.median(runs)
            print(f"{ring:>5} MiB {med:>12.2f} {med / best:>8.2f}  " + " ".join(f"{v:.2f}" for v in runs))


if __name__ == "__main__":
    main()
