#!/usr/bin/env python3
"""The executor showdown: today's spin-and-yield queue against ringcast, side by side in one run.

One executor process + W worker processes, K steps. Each step the executor broadcasts a ~2 KB
scheduler-output-like object; every worker burns `--work-ms` of pure-Python CPU ("the model step"),
then replies (only rank 0 for single-rank routing, every rank for aggregation).

Variants:
  (a) baseline   spin + os.sched_yield() queue in Python (bench/showdown/spin_yield_mq.py), the GIL held
                 between polls; replies read rank by rank, each with its own spin-wait
  (b) ringcast   ringcast.MessageQueue broadcast; replies through one MessageQueue per worker, read rank by rank
  (c) gather     ringcast.MessageQueue broadcast; replies through ringcast.ReplyGather: one wait for all ranks
  (d) gather     as (c), with the hybrid waits spinning up to 2 ms (a whole step) before sleeping
each in sync mode and in async-scheduling mode, where the executor's main thread spends `--prep-ms` of
pure-Python work preparing the next step while a second thread collects the replies.

Per variant: step latency p50/p99; overhead = latency - max(slowest collected worker's measured work,
prep time in async mode); executor and worker CPU%; the workers' idle CPU% over the second that starts
10 ms after the last step. Writes a table, JSON and a plot (PNG, matplotlib) under --out.
"""

import argparse
import ctypes
import json
import os
import pickle
import platform
import queue
import resource
import signal
import statistics
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import ringcast  # noqa: E402
from spin_yield_mq import SpinYieldQueue  # noqa: E402



def busy(seconds):
    """Pure-Python CPU work (holds the GIL, as a worker's Python step does). Returns seconds spent."""
    t0 = time.perf_counter()
    x = 0
    while time.perf_counter() - t0 < seconds:
        x += 1
    return time.perf_counter() - t0


def scheduler_output(step):
    """~2 KB, shaped like an executor's per-step scheduler output."""
    return {
        "step": step,
        "req_ids": [f"req-{step}-{i}" for i in range(24)],
        "num_scheduled_tokens": {i: (i * 7) % 13 + 1 for i in range(24)},
        "block_ids": [[step + i * 16 + j for j in range(8)] for i in range(12)],
        "finished": [],
    }


def proc_cpu_seconds(pid):
    """CPU time of all threads of `pid`, in ns resolution (/proc/<pid>/stat ticks are 10 ms: too coarse
    to tell 0.1 % from 1 % over a second)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
            total += int(f.read().split()[0])
    return total / 1e9


def self_cpu_seconds():
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


# ---- transports: how a step's request goes out and its replies come back ---------------------------


def collect_rank_by_rank(reply_queues, step, ranks):
    """Today's aggregation: one reply queue per worker, read one after another, each with its own wait."""
    out = []
    for r in ranks:
        rep = reply_queues[r].dequeue()
        if rep[0] != step:
            raise RuntimeError(f"rank {r}: reply for step {rep[0]} while collecting step {step}")
        out.append(rep)
    return out


class Baseline:
    name = "(a) spin+yield, rank by rank"

    def __init__(self, workers):
        self.workers = workers
        self.bcast = SpinYieldQueue(workers, max_chunk_bytes=1 << 16, max_chunks=10)
        self.reply_owners = [SpinYieldQueue(1, max_chunk_bytes=1 << 12, max_chunks=10) for _ in range(workers)]
        self.replies = [SpinYieldQueue.attach(q.handle(), 0) for q in self.reply_owners]  # we read them

    def worker_endpoints(self, rank):
        inq = SpinYieldQueue.attach(self.bcast.handle(), rank)
        outq = SpinYieldQueue.attach(self.reply_owners[rank].handle(), None)  # the worker writes
        return inq.dequeue, lambda step, obj: outq.enqueue(obj), outq.close

    def broadcast(self, obj):
        self.bcast.enqueue(obj)

    def collect(self, step, ranks):
        return collect_rank_by_rank(self.replies, step, ranks)

    def close(self):
        for q in self.replies:
            q.close()
        for q in [self.bcast] + self.reply_owners:
            q.close()


class RingcastRankByRank:
    name = "(b) ringcast, rank by rank"

    def __init__(self, workers):
        self.workers = workers
        self.bcast = ringcast.MessageQueue(workers, workers)
        self.handle = self.bcast.export_handle()
        self.pipes = [os.pipe() for _ in range(workers)]
        self.replies = None

    def worker_endpoints(self, rank):
        # As executors do it: each worker creates its own reply queue (it is the writer, the executor
        # its one reader) and sends the handle back.
        inq = ringcast.MessageQueue.create_from_handle(self.handle, rank)
        outq = ringcast.MessageQueue(1, 1, max_chunk_bytes=1 << 14, max_chunks=4)
        with os.fdopen(self.pipes[rank][1], "wb") as f:
            pickle.dump(outq.export_handle(), f)
        outq.wait_until_ready()
        return inq.dequeue, lambda step, obj: outq.enqueue(obj), outq.shutdown

    def connect(self):
        self.replies = []
        for r, (rd, wr) in enumerate(self.pipes):
            os.close(wr)
            with os.fdopen(rd, "rb") as f:
                self.replies.append(ringcast.MessageQueue.create_from_handle(pickle.load(f), 0))

    def broadcast(self, obj):
        self.bcast.enqueue(obj)

    def collect(self, step, ranks):
        return collect_rank_by_rank(self.replies, step, ranks)

    def close(self):
        self.bcast.shutdown()


class RingcastGather:
    name = "(c) ringcast + gather"
    spin_us = 10.0  # the library's default hybrid spin

    def __init__(self, workers):
        self.workers = workers
        self.bcast = ringcast.MessageQueue(workers, workers, spin_us=self.spin_us)
        self.gather = ringcast.ReplyGather(workers, spin_us=self.spin_us)
        self.handles = (self.bcast.export_handle(), self.gather.export_handle())

    def worker_endpoints(self, rank):
        inq = ringcast.MessageQueue.create_from_handle(self.handles[0], rank)
        outg = ringcast.ReplyGather.create_from_handle(self.handles[1], rank)
        return inq.dequeue, outg.reply, outg.close

    def broadcast(self, obj):
        self.bcast.enqueue(obj)

    def collect(self, step, ranks):
        return self.gather.collect(step, ranks)  # one wait, one GIL release, for the whole set

    def close(self):
        self.bcast.shutdown()


class RingcastGatherLongSpin(RingcastGather):
    """(c) with the hybrid spin stretched over a whole step (2 ms) before sleeping: the latency of a
    spinning queue while the step lasts, and still no CPU once idle (the spin is bounded)."""

    name = "(d) ringcast + gather, 2ms spin"
    spin_us = 2000.0


TRANSPORTS = {"a": Baseline, "b": RingcastRankByRank, "c": RingcastGather, "d": RingcastGatherLongSpin}


def worker_main(transport, rank, work_s, reply_all):
    # Die with the executor: a spin-waiting orphan would burn a core forever.
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() == 1:
        os._exit(1)
    recv, reply, cleanup = transport.worker_endpoints(rank)
    while True:
        msg = recv()
        if msg is None:
            break
        step = msg["step"]
        work = busy(work_s)
        if reply_all or rank == 0:
            reply(step, (step, work, rank))
    cleanup()
    os._exit(0)


def run_variant(kind, workers, steps, work_s, reply_all, prep_s):
    transport = TRANSPORTS[kind](workers)
    pids = []
    try:
        return measure(transport, pids, kind, workers, steps, work_s, reply_all, prep_s)
    except BaseException:
        for p in pids:  # never leave spinning workers behind
            try:
                os.kill(p, 9)
                os.waitpid(p, 0)
            except OSError:
                pass
        raise


def measure(transport, pids, kind, workers, steps, work_s, reply_all, prep_s):
    for rank in range(workers):
        pid = os.fork()
        if pid == 0:
            try:
                worker_main(transport, rank, work_s, reply_all)
            finally:
                os._exit(1)
        pids.append(pid)
    if hasattr(transport, "connect"):
        transport.connect()
    ranks = list(range(workers)) if reply_all else [0]
    warmup = max(10, steps // 10)
    lat, over = [], []

    jobs, done = queue.Queue(), queue.Queue()
    collector = None
    if prep_s > 0:  # async scheduling: another thread collects while the main thread prepares

        def collect_loop():
            while True:
                step = jobs.get()
                if step is None:
                    return
                done.put(transport.collect(step, ranks))

        collector = threading.Thread(target=collect_loop, daemon=True)
        collector.start()

    cpu0, wall0 = self_cpu_seconds(), time.perf_counter()
    wcpu0 = [proc_cpu_seconds(p) for p in pids]
    for step in range(1, steps + warmup + 1):
        t0 = time.perf_counter()
        transport.broadcast(scheduler_output(step))
        if collector is not None:
            jobs.put(step)
            busy(prep_s)  # prepare the next step in pure Python
            replies = done.get()
        else:
            replies = transport.collect(step, ranks)
        dt = time.perf_counter() - t0
        if step > warmup:
            lat.append(dt)
            over.append(dt - max(max(r[1] for r in replies), prep_s))
    wall = time.perf_counter() - wall0
    exec_cpu = (self_cpu_seconds() - cpu0) / wall * 100
    worker_cpu = [(proc_cpu_seconds(p) - c) / wall * 100 for p, c in zip(pids, wcpu0)]
    # Idle: the workers now wait for a step that does not come.
    time.sleep(0.010)
    idle0, t_idle = [proc_cpu_seconds(p) for p in pids], time.perf_counter()
    time.sleep(1.0)
    idle_wall = time.perf_counter() - t_idle
    idle = [(proc_cpu_seconds(p) - c) / idle_wall * 100 for p, c in zip(pids, idle0)]
    if collector is not None:
        jobs.put(None)
        collector.join()
    transport.broadcast(None)
    for p in pids:
        _, status = os.waitpid(p, 0)
        if status != 0:
            raise RuntimeError(f"worker {p} exited with status {status}")
    transport.close()

    def q(v, f):
        v = sorted(v)
        return v[min(len(v) - 1, int(f * len(v)))] * 1e6

    return {
        "variant": transport.name,
        "kind": kind,
        "replies": "all" if reply_all else "single",
        "mode": "async" if prep_s > 0 else "sync",
        "steps": steps,
        "p50_us": q(lat, 0.5),
        "p99_us": q(lat, 0.99),
        "overhead_p50_us": q(over, 0.5),
        "overhead_p99_us": q(over, 0.99),
        "executor_cpu_pct": exec_cpu,
        "worker_cpu_pct": worker_cpu,
        "worker_idle_cpu_pct": idle,
    }


def plot(rows, path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib missing: no plot)")
        return
    labels = [f"{r['kind']} {r['replies']}\n{r['mode']}" for r in rows]
    values = [max(r["overhead_p50_us"], 1.0) for r in rows]
    colors = {"a": "#c0392b", "b": "#2980b9", "c": "#27ae60", "d": "#8e44ad"}
    fig, ax = plt.subplots(figsize=(11, 4.5))
    ax.bar(range(len(rows)), values, color=[colors[r["kind"]] for r in rows])
    ax.set_yscale("log")
    ax.set_xticks(range(len(rows)), labels, fontsize=8)
    ax.set_ylabel("step overhead p50 (µs, log)")
    ax.set_title("executor showdown: (a) spin+yield rank-by-rank, (b) ringcast rank-by-rank, (c) ringcast + gather, (d) (c) with 2 ms spin")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"plot: {path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--work-ms", type=float, default=1.0)
    ap.add_argument("--prep-ms", type=float, default=2.0, help="async mode: main thread's preparation work")
    ap.add_argument("--variants", default="abcd")
    ap.add_argument("--out", default="build/report")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    rows = []
    for prep in (0.0, args.prep_ms / 1e3):
        for reply_all in (False, True):
            for kind in args.variants:
                rows.append(run_variant(kind, args.workers, args.steps, args.work_ms / 1e3, reply_all, prep))
                r = rows[-1]
                print(f"  ran {r['variant']:<30} {r['replies']:<6} {r['mode']:<5} p50 {r['p50_us']:9.1f} us", flush=True)

    print()
    print(f"executor showdown — {args.workers} workers, {args.steps} steps (+warm-up), worker work {args.work_ms} ms, "
          f"async prep {args.prep_ms} ms; {platform.node()}, {os.cpu_count()} CPUs, {time.strftime('%Y-%m-%d')}")
    hdr = f"{'variant':<30} {'replies':<7} {'mode':<5} {'p50 us':>9} {'p99 us':>9} {'ovh p50':>9} {'ovh p99':>9} " \
          f"{'exec CPU%':>9} {'worker CPU%':>12} {'idle CPU%':>10}"
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        print(f"{r['variant']:<30} {r['replies']:<7} {r['mode']:<5} {r['p50_us']:9.1f} {r['p99_us']:9.1f} "
              f"{r['overhead_p50_us']:9.1f} {r['overhead_p99_us']:9.1f} {r['executor_cpu_pct']:9.1f} "
              f"{statistics.mean(r['worker_cpu_pct']):12.1f} {max(r['worker_idle_cpu_pct']):10.2f}")

    # Targets, as ratios measured in this run.
    def find(kind, replies, mode):
        return next((r for r in rows if r["kind"] == kind and r["replies"] == replies and r["mode"] == mode), None)

    print("\ntargets (this run):")
    for mode in ("sync", "async"):
        single, agg = find("c", "single", mode), find("c", "all", mode)
        if single and agg:
            ratio = agg["overhead_p50_us"] / max(single["overhead_p50_us"], 1e-9)
            print(f"  [{mode}] gather all / single overhead p50 = {ratio:.2f} (target <= 1.05): "
                  f"{'met' if ratio <= 1.05 else 'MISSED'}")
        for kind in ("c", "d"):
            base, ours = find("a", "all", mode), find(kind, "all", mode)
            if base and ours:
                ratio = base["overhead_p50_us"] / max(ours["overhead_p50_us"], 1e-9)
                print(f"  [{mode}] baseline / ({kind}) overhead p50 = {ratio:.1f}x (target >= 5): "
                      f"{'met' if ratio >= 5 else 'MISSED'}")
    worst_idle = max(max(r["worker_idle_cpu_pct"]) for r in rows if r["kind"] != "a")
    print(f"  ringcast idle worker CPU, worst = {worst_idle:.2f}% (target <= 1%): {'met' if worst_idle <= 1 else 'MISSED'}")

    with open(os.path.join(args.out, "showdown.json"), "w") as f:
        json.dump({"workers": args.workers, "steps": args.steps, "work_ms": args.work_ms, "prep_ms": args.prep_ms,
                   "cpus": os.cpu_count(), "date": time.strftime("%Y-%m-%d"), "rows": rows}, f, indent=1)
    print(f"json: {os.path.join(args.out, 'showdown.json')}")
    plot(rows, os.path.join(args.out, "showdown.png"))


if __name__ == "__main__":
    main()
