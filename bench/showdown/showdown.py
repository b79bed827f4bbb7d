#!/usr/bin/env python3
"""The executor showdown: today's spin-and-yield queue against ringcast, side by side in one run.

One executor process + W worker processes, K steps. Each step the executor broadcasts a ~2 KB
scheduler-output-like object; every worker runs a fixed amount of pure-Python work calibrated to
`--work-ms` on an idle CPU ("the model step"), then replies (only rank 0 for single-rank routing, every
rank for aggregation).

Variants:
  (a) baseline   spin + os.sched_yield() queue in Python (bench/showdown/spin_yield_mq.py), the GIL held
                 between polls; replies read rank by rank, each with its own spin-wait
  (b) ringcast   ringcast.MessageQueue broadcast; replies through one MessageQueue per worker, read rank by rank
  (c) gather     ringcast.MessageQueue broadcast; replies through ringcast.ReplyGather: one wait for all ranks
                 (in async mode collect_async: no collector thread, result() after the preparation).
                 (b) and (c) use the library's defaults, the adaptive hybrid spin among them (spin up to
                 the cap while the recent waits fit in it, else about twice them, politely; the cap
                 is 5 ms in a worker's receive (2 ms where the queue's processes share CPUs) and
                 10 ms in the executor's collect; past that, sleep until shortly before the expected
                 end)
  (d) gather     as (c) without the adaptive spin (spin_max_us=0: spin 10 us, then sleep)
  (e) gather     as (c) with wait="spin" everywhere: never sleeps, an idle worker burns its core (not
                 run unless asked, --variants abcde): the fastest any wait of ringcast can react
  (f) gather     as (c) without wake-ahead (MessageQueue(wake_ahead=False)): a sleeping worker is woken by
                 the request's publish instead of before its pickling (not run unless asked)
  (g) gather     as (c) with another cap on the collect's adaptive spin (ReplyGather(spin_max_us=
                 --g-spin-max-us): 2 ms unless told, the default until 2026-12-03; the workers' too with
                 --g-queue-spin-max-us): what the collect's longer default cap changes (not run unless asked)
each in sync mode and in async-scheduling mode, where the executor's main thread spends `--prep-ms` of
pure-Python work preparing the next step while a second thread collects the replies: a Python thread
for (a) and (b), as executors do it today; ringcast's collect_async for (c), (d) (no thread: the replies
wait in the reply rings until the main thread takes them).

Per variant: step latency p50/p99; overhead = latency - max(slowest collected worker's work, the
preparation in async mode), both measured as the thread CPU time they took, so time they spent without
a CPU (taken by a spinning neighbour) or without the GIL (taken by a polling thread) counts as overhead;
and how much of it the step's critical path spent without a CPU, and in how many steps — where
processes outnumber CPUs, the cost of their placement, apart from the transport's;
executor and worker CPU%; the workers' and the executor's idle CPU% over the second that starts 10 ms
after the last step (the executor's: every thread of its process, its transport still open).
Every configuration runs --repeats times, interleaved; the table shows medians and each run's overhead.
With enough CPUs (--pin auto) every process is pinned: the executor to one core's two SMT siblings,
each worker to a core of its own; a run's figure then no longer depends on where the scheduler put whom.
With fewer CPUs than processes, --pin shared puts the executor alone on one CPU and the workers in turn
on the others (steady async figures; sync steps then wait for workers that share a CPU).
The breakdown of a sync step adds how often each side slept in the kernel per step (0: it spun).
With every process pinned, the targets are shown once more on the steps whose executor ran at full speed:
a CPU of the 16-core VM runs Python ~1.7x slower in episodes that no variant causes (classify_full_speed),
and that draw, not the transport, moves a cell's median over a few runs.
The "python floor" line is the pickling every variant does on the step's critical path, measured
without any transport: no transport's overhead can be below it. It is measured in a loop of its own;
--trace times the same pickling where it happens, inside every part of the sync step (pickle_clock.py),
and prints what is left of each part and of the overhead: the transport's share (with every process
pinned, once more on the full-speed steps alone). --dump-steps keeps every step's parts (steps.json.gz).
With every process pinned the sync all / single line also gives the two cells matched on the critical
worker's speed (all_single.py): an all-rank step waits for the slowest of W vCPUs.
Writes a table, JSON and a plot (PNG, matplotlib) under --out.
"""

import argparse
import ctypes
import gzip
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

import pickle_clock  # noqa: E402
from all_single import DumpError, speed_matched  # noqa: E402
import ringcast  # noqa: E402
from spin_yield_mq import SpinYieldQueue  # noqa: E402

# --trace: the modules whose own calls pickle a step's messages (ringcast's Python layer, the baseline).
TRACED_PICKLERS = ("ringcast._queue", "ringcast._gather", "spin_yield_mq")



class Compute:
    """A fixed amount of pure-Python CPU work (holds the GIL, as a worker's Python step does), calibrated
    once so that it takes `seconds` on an idle CPU. Fixed work, not "spin until the clock says so": a
    step that loses its CPU (to a spinning neighbour) or the GIL (to a polling thread) takes longer,
    and that shows as overhead. Returns the thread CPU time the work took: the work's own cost, without
    the time it spent waiting for a CPU or for the GIL."""

    def __init__(self, seconds):
        self.seconds = seconds
        self.iters = 0
        if seconds > 0:
            # Best of 5 on every CPU this process may use: the calibration must not absorb a hiccup, nor
            # one CPU's slow episode (docs/platform.md, "Python's speed episodes": a CPU of the 16-core VM
            # runs this loop 1.6-1.8x slower for up to seconds; calibrated there, "1 ms" was 0.6 ms at
            # full speed in one call and 1 ms in the next). The fastest of all is the full speed.
            n, best = 20000, float("inf")
            home = os.sched_getaffinity(0)
            try:
                for cpu in sorted(home):
                    os.sched_setaffinity(0, {cpu})
                    for _ in range(5):
                        t0 = time.thread_time()
                        self._spin(n)
                        best = min(best, time.thread_time() - t0)
            finally:
                os.sched_setaffinity(0, home)
            self.iters = max(1, int(n * seconds / best))

    @staticmethod
    def _spin(n):
        x = 0
        for i in range(n):
            x += i
        return x

    def __call__(self):
        t0 = time.thread_time()
        self._spin(self.iters)
        return time.thread_time() - t0


def scheduler_output(step):
    """~2 KB pickled, shaped like an executor's per-step scheduler output."""
    ids = [f"req-{100000 + step}-{i}" for i in range(32)]
    return {
        "step": step,
        "req_ids": ids,
        "num_scheduled_tokens": {r: (i * 7) % 13 + 1 for i, r in enumerate(ids)},
        "block_ids": [[step + i * 16 + j for j in range(16)] for i in range(16)],
        "finished": [],
    }


def thread_cpu_ns(pid):
    """CPU time of each thread of `pid` (tid -> ns), from schedstat: ns resolution (/proc/<pid>/stat ticks
    are 10 ms: too coarse to tell 0.1 % from 1 % over a second)."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
            out[tid] = int(f.read().split()[0])
    return out


def proc_cpu_seconds(pid):
    """CPU time of all threads of `pid`, s (thread_cpu_ns summed)."""
    return sum(thread_cpu_ns(pid).values()) / 1e9


def self_cpu_seconds():
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


# ---- transports: how a step's request goes out and its replies come back ---------------------------


class ThreadCollector:
    """Today's async executor: a Python thread blocks in collect() while the main thread prepares the
    next step, and hands the replies over through a queue."""

    def __init__(self, transport, ranks):
        self.jobs, self.done = queue.Queue(), queue.Queue()

        def loop():
            while (step := self.jobs.get()) is not None:
                self.done.put(transport.collect(step, ranks))

        self.thread = threading.Thread(target=loop, daemon=True)
        self.thread.start()

    def start(self, step):
        self.jobs.put(step)
        return self.done.get

    def close(self):
        self.jobs.put(None)
        self.thread.join()


class GatherAsyncCollector:
    """ringcast's async collect: ReplyGather.collect_async — the replies wait in the reply rings; the main
    thread's result() finds them there after its preparation (no Python thread, no hand-off, no wake)."""

    def __init__(self, gather, ranks):
        self.gather, self.ranks = gather, ranks

    def start(self, step):
        return self.gather.collect_async(step, self.ranks).result

    def close(self):
        pass


class RankByRank:
    """Today's aggregation, shared by (a) and (b): a broadcast queue `bcast` and one reply queue per
    worker (`replies`), read one after another, each with its own wait; async collection by a Python
    thread."""

    def broadcast(self, obj):
        self.bcast.enqueue(obj)

    def collect(self, step, ranks):
        out = []
        for r in ranks:
            rep = self.replies[r].dequeue()
            if rep[0] != step:
                raise RuntimeError(f"rank {r}: reply for step {rep[0]} while collecting step {step}")
            out.append(rep)
        return out

    def async_collector(self, ranks):
        return ThreadCollector(self, ranks)


class Baseline(RankByRank):
    name = "(a) spin+yield, rank by rank"

    def __init__(self, workers):
        self.workers = workers
        self.bcast = SpinYieldQueue(workers, max_chunk_bytes=1 << 16, max_chunks=10)
        self.reply_owners = [SpinYieldQueue(1, max_chunk_bytes=1 << 12, max_chunks=10) for _ in range(workers)]
        self.replies = [SpinYieldQueue.attach(q.handle(), 0) for q in self.reply_owners]  # we read them

    def worker_endpoints(self, rank):
        inq = SpinYieldQueue.attach(self.bcast.handle(), rank)
        outq = SpinYieldQueue.attach(self.reply_owners[rank].handle(), None)  # the worker writes
        return inq.dequeue, lambda step, obj: outq.enqueue(obj), outq.close, None

    def executor_sleeps(self):
        return None  # it never sleeps: it spins

    def close(self):
        for q in self.replies:
            q.close()
        for q in [self.bcast] + self.reply_owners:
            q.close()


class RingcastRankByRank(RankByRank):
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
        return inq.dequeue, lambda step, obj: outq.enqueue(obj), outq.shutdown, lambda: inq._reader.waits

    def executor_sleeps(self):
        return sum(q._reader.waits for q in self.replies)

    def connect(self):
        self.replies = []
        for r, (rd, wr) in enumerate(self.pipes):
            os.close(wr)
            with os.fdopen(rd, "rb") as f:
                self.replies.append(ringcast.MessageQueue.create_from_handle(pickle.load(f), 0))

    def close(self):
        self.bcast.shutdown()


class RingcastGather:
    name = "(c) ringcast + gather"
    options = {}  # the library's defaults: what a user who sets nothing gets

    def __init__(self, workers):
        self.workers = workers
        self.bcast = ringcast.MessageQueue(workers, workers, **self.options)
        self.gather = ringcast.ReplyGather(workers, **self.options)
        self.handles = (self.bcast.export_handle(), self.gather.export_handle())

    def worker_endpoints(self, rank):
        inq = ringcast.MessageQueue.create_from_handle(self.handles[0], rank)
        outg = ringcast.ReplyGather.create_from_handle(self.handles[1], rank)
        return inq.dequeue, outg.reply, outg.close, lambda: inq._reader.waits

    def executor_sleeps(self):
        return self.gather._collector.kernel_waits

    def broadcast(self, obj):
        self.bcast.enqueue(obj)

    def collect(self, step, ranks):
        return self.gather.collect(step, ranks)  # one wait, one GIL release, for the whole set

    def async_collector(self, ranks):
        return GatherAsyncCollector(self.gather, ranks)

    def close(self):
        self.bcast.shutdown()


class RingcastGatherNoAdaptiveSpin(RingcastGather):
    """(c) without the adaptive spin (spin_max_us=0, the default before it became one): every wait
    spins 10 us, then sleeps in the kernel — the CPU-frugal end of the trade-off."""

    name = "(d) ringcast + gather, no adaptive spin"
    options = {"spin_max_us": 0.0}


class RingcastGatherNoWakeAhead(RingcastGather):
    """(c) without waking the workers ahead (MessageQueue(wake_ahead=False)): a sleeping worker is woken
    by the publish, after the request was pickled, not before — what (c) did until wake-ahead existed."""

    name = "(f) ringcast + gather, no wake-ahead"

    def __init__(self, workers):
        self.workers = workers
        self.bcast = ringcast.MessageQueue(workers, workers, wake_ahead=False)
        self.gather = ringcast.ReplyGather(workers)
        self.handles = (self.bcast.export_handle(), self.gather.export_handle())


class RingcastGatherPureSpin(RingcastGather):
    """(c) with every wait a pure spin: the bound on what a wait strategy can take off a step, at the
    cost the library exists to avoid (a core per idle worker)."""

    name = "(e) ringcast + gather, pure spin"
    options = {"wait": "spin"}


class RingcastGatherCollectCap(RingcastGather):
    """(c) with another cap on the adaptive spin of the executor's collect (ReplyGather's spin_max_us,
    --g-spin-max-us; 2 ms unless told: the collect's cap and the workers' before 2026-12-03) and, if asked,
    of the workers' receive (MessageQueue's, --g-queue-spin-max-us): whether a step between the two
    caps is slept through or spun through — a wake-up and the cold caches after it against the CPU."""

    name = "(g) ringcast + gather, collect spin cap 2 ms"
    gather_options = {"spin_max_us": 2000.0}
    queue_options = {}

    def __init__(self, workers):
        self.workers = workers
        self.bcast = ringcast.MessageQueue(workers, workers, **self.queue_options)
        self.gather = ringcast.ReplyGather(workers, **self.gather_options)
        self.handles = (self.bcast.export_handle(), self.gather.export_handle())


TRANSPORTS = {"a": Baseline, "b": RingcastRankByRank, "c": RingcastGather, "d": RingcastGatherNoAdaptiveSpin,
              "e": RingcastGatherPureSpin, "f": RingcastGatherNoWakeAhead, "g": RingcastGatherCollectCap}


def fork_workers(pids, workers, body):
    """Forks `workers` processes, each running body(rank) and exiting; their pids go into `pids` as they
    start, so that a caller's kill_workers(pids) reaches every one started. Each dies with its parent: a
    spin-waiting orphan would burn a core forever."""
    for rank in range(workers):
        pid = os.fork()
        if pid == 0:
            try:
                ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
                if os.getppid() == 1:
                    os._exit(1)
                body(rank)
            finally:
                os._exit(1)
        pids.append(pid)


def kill_workers(pids):
    """Never leaves a spinning worker behind: SIGKILL and reap every pid in `pids`."""
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
            os.waitpid(p, 0)
        except OSError:
            pass


def worker_main(transport, rank, work, reply_all, reply_every=False):
    if PINNING["workers"]:
        os.sched_setaffinity(0, {PINNING["workers"][rank]})
    recv, reply, cleanup, sleeps = transport.worker_endpoints(rank)
    spent = pickle_clock.spent  # stays 0 unless --trace installed the timed pickle
    reply_pickle_ns = []
    while True:
        loads0 = spent["loads"]
        msg = recv()
        if msg is None:
            break
        step = msg["step"]
        if msg.get("barrier"):  # every rank answers: the executor knows the backlog is done
            reply_pickle = statistics.median(reply_pickle_ns) if reply_pickle_ns else 0
            reply(step, (step, 0.0, rank, sleeps() if sleeps else None, reply_pickle))
            continue
        t_recv = time.monotonic_ns()  # CLOCK_MONOTONIC: one clock for every process of the machine
        unpickle = spent["loads"] - loads0
        cpu = work()
        if reply_all or rank == 0 or reply_every:  # reply_every: --settle-others (the executor drains them)
            dumps0 = spent["dumps"]
            reply(step, (step, cpu, rank, t_recv, time.monotonic_ns(), unpickle))
            reply_pickle_ns.append(spent["dumps"] - dumps0)  # a reply cannot carry its own pickling time
    cleanup()
    os._exit(0)


# CPU pinning (--pin): the executor's two threads (main, and the collector thread of (a)/(b) in async
# mode) on two CPUs of their own, worker i alone on another. Every variant runs on the same CPUs, so a
# process that migrates or shares a core with a neighbour's spin no longer decides a run's figure.
PINNING = {"executor": None, "workers": None, "shared": False}


def cpu_cores(cpus):
    """The allowed CPUs grouped by physical core (SMT siblings together), in CPU order."""
    cores = {}
    for c in cpus:
        try:
            with open(f"/sys/devices/system/cpu/cpu{c}/topology/core_id") as f:
                core = f.read().strip()
            with open(f"/sys/devices/system/cpu/cpu{c}/topology/physical_package_id") as f:
                core = (f.read().strip(), core)
        except OSError:
            core = ("?", str(c))
        cores.setdefault(core, []).append(c)
    return list(cores.values())


def plan_pinning(mode, workers):
    """The CPUs of the executor and of each worker, or None (not pinned) with the reason. SMT siblings
    share a core's execution units: the executor's two threads (which take turns holding the GIL) get
    one core's siblings, and each worker a core of its own while there are cores (then siblings)."""
    cpus = sorted(os.sched_getaffinity(0))
    if mode == "off":
        return None, "off (--pin off)"
    if mode == "shared":
        # Fewer CPUs than processes (the 2-core VM: executor + 2 workers): left to the scheduler, a run's
        # figure depends on whom it put together — the executor beside a worker (the step waits for both
        # on one CPU while a waiting neighbour's spin keeps the other busy) or the workers together —
        # and that placement, not the transport, split the 2-core async figures into ~0.1 and ~1 ms
        # by batch. Pinned, every run and variant gets one placement: the executor alone on the first
        # CPU (both its threads), the workers in turn on the others.
        if len(cpus) < 2:
            return None, "off: --pin shared needs 2 CPUs"
        worker_cpus = [cpus[1 + i % (len(cpus) - 1)] for i in range(workers)]
        return ({"executor": {cpus[0]}, "workers": worker_cpus, "shared": True},
                f"shared: executor alone on CPU {cpus[0]}, workers on CPUs {','.join(map(str, worker_cpus))} "
                f"({len(cpus)} CPUs for {workers + 1} processes)")
    if len(cpus) < workers + 2:
        if mode == "on":
            raise SystemExit(f"--pin on needs {workers + 2} CPUs (executor 2, one per worker), this process "
                             f"may use {len(cpus)}")
        return None, f"off: {len(cpus)} CPUs < {workers + 2} (executor 2 + one per worker)"
    cores = cpu_cores(cpus)
    executor = cores[0][:2] if len(cores[0]) >= 2 else [c for core in cores[:2] for c in core[:1]]
    rest = [core for core in ([c for c in core if c not in executor] for core in cores) if core]
    firsts = [core[0] for core in rest]
    seconds = [c for core in rest for c in core[1:]]
    worker_cpus = (firsts + seconds)[:workers]
    if len(worker_cpus) < workers:
        return None, "off: not enough CPUs left for the workers"
    shared = max(0, workers - len(firsts))
    text = (f"executor on CPUs {executor[0]},{executor[1]}, workers on CPUs {','.join(map(str, worker_cpus))} "
            f"({len(cores)} cores of {len(cpus)} CPUs; {shared} worker(s) on an SMT sibling of another)")
    return {"executor": set(executor), "workers": worker_cpus}, text


def run_variant(kind, workers, steps, work, reply_all, prep, idle_s=1.0):
    transport = TRANSPORTS[kind](workers)
    pids = []
    try:
        return measure(transport, pids, kind, workers, steps, work, reply_all, prep, idle_s)
    except BaseException:
        kill_workers(pids)
        raise


# --settle-others: in single-rank sync steps every worker replies too, and after each step's clock has
# stopped the executor collects the other ranks' replies, so that the next request finds all W workers
# waiting in their receive, as an all-rank step does. What is left between the two cells is the
# collect's wait for W replies; what goes is the difference in who waits on the ring (and reads and
# unpickles the request at once) when it comes. Sync only: an async step's replies overlap its next one.
SETTLE_OTHERS = False


def measure(transport, pids, kind, workers, steps, work, reply_all, prep, idle_s):
    settle = SETTLE_OTHERS and not reply_all and prep.iters == 0
    fork_workers(pids, workers, lambda rank: worker_main(transport, rank, work, reply_all, reply_every=settle))
    if hasattr(transport, "connect"):
        transport.connect()
    ranks = list(range(workers)) if reply_all else [0]
    warmup = max(10, steps // 10)
    lat, over, parts = [], [], []

    # Async scheduling: the replies are collected while the main thread prepares the next step.
    collector = None
    if prep.iters > 0:
        collector = transport.async_collector(ranks)

    spent = pickle_clock.spent
    # The replies' unpickling that counts is what happens after the critical reply was sent: a
    # rank-by-rank collect unpickles earlier replies while the critical worker still works.
    pickle_clock.loads_log = unpickled = []  # this process only: the workers were forked before
    cpu0, wall0 = self_cpu_seconds(), time.perf_counter()
    wcpu0 = [proc_cpu_seconds(p) for p in pids]
    exec_sleeps0 = transport.executor_sleeps()
    speed = {"executor": [], "worker": [], "prep": []}  # per measured step, beside its parts: classify_full_speed()
    for step in range(1, steps + warmup + 1):
        request = scheduler_output(step)  # the scheduler's work: before the step's clock starts
        probe_cpu = SPEED_PROBE()  # how fast this CPU runs Python right now (VM speed episodes): off the clock
        dumps0 = spent["dumps"]
        unpickled.clear()
        t0 = time.perf_counter()
        n0 = time.monotonic_ns()
        transport.broadcast(request)
        n1 = time.monotonic_ns()
        request_pickle = spent["dumps"] - dumps0
        if collector is not None:
            replies_later = collector.start(step)
            n_prep0 = time.monotonic_ns()
            prep_cpu = prep()  # prepare the next step in pure Python
            n_prep = time.monotonic_ns()
            prep_stalled = (n_prep - n_prep0) / 1e3 - prep_cpu * 1e6
            replies = replies_later()
        else:
            prep_cpu = prep_stalled = 0.0
            n_prep = n1
            replies = transport.collect(step, ranks)
        n2 = time.monotonic_ns()
        dt = time.perf_counter() - t0
        if settle and workers > 1:  # off the clock (--settle-others)
            transport.collect(step, list(range(1, workers)))
        if step > warmup:
            lat.append(dt)
            parts.append(step_breakdown(n0, n1, n_prep, n2, replies, request_pickle, unpickled, prep_stalled))
            # What the step had to cost: its slowest collected worker's work, or the preparation if
            # longer (both as CPU time). Everything else is overhead: the transport's waits and wakes,
            # pickling, and time the work spent without a CPU or without the GIL.
            over.append(dt - max(max(r[1] for r in replies), prep_cpu))
            parts[-1]["overhead"] = over[-1] * 1e6
            speed["executor"].append(probe_cpu)
            speed["worker"].append(max(replies, key=lambda r: r[4])[1])  # the critical worker's work
            speed["prep"].append(prep_cpu)
    wall = time.perf_counter() - wall0
    pickle_clock.loads_log = None
    exec_cpu = (self_cpu_seconds() - cpu0) / wall * 100
    exec_sleeps = transport.executor_sleeps()
    exec_sleeps = None if exec_sleeps is None else (exec_sleeps - exec_sleeps0) / (steps + warmup)
    worker_cpu = [(proc_cpu_seconds(p) - c) / wall * 100 for p, c in zip(pids, wcpu0)]
    # Idle: the workers now wait for a step that does not come. With single-rank replies the other
    # ranks may still be working through steps the executor did not wait for: a barrier every rank
    # answers comes first, so that the second measured is idle time.
    if collector is not None:
        collector.close()
    barrier = steps + warmup + 1
    transport.broadcast({"step": barrier, "barrier": True})
    barrier_replies = transport.collect(barrier, list(range(workers)))
    # Kernel sleeps of each worker's receive per step (warm-up included): 0 = it always spun.
    worker_sleeps = [None if r[3] is None else r[3] / (steps + warmup) for r in barrier_replies]
    # --trace: what pickling one reply took (median of a worker's replies; the median over workers).
    # The split is of the sync step only: in async mode the workers' pickling overlaps the preparation.
    reply_pickle = statistics.median(r[4] for r in barrier_replies if reply_all or r[2] == 0) / 1e3
    for t in parts if prep.iters == 0 else ():
        t["reply_pickle"] = reply_pickle
        t["pickling"] = t["request_pickle"] + t["request_unpickle"] + reply_pickle + t["replies_unpickle"]
        t["overhead_but_pickling"] = t["overhead"] - t["pickling"]
        t["enqueue_but_pickling"] = t["enqueue"] - t["request_pickle"]
        t["worker_has_it_but_unpickling"] = t["last_worker_has_it"] - t["request_unpickle"]
        t["collected_but_pickling"] = t["reply_to_collected"] - reply_pickle - t["replies_unpickle"]
    time.sleep(0.010)
    me = os.getpid()
    # The executor's own window holds nothing but the sleep: reading the workers' /proc/<pid>/task/*
    # files costs this process 0.3-0.5 ms of CPU a sweep of 8 (2-core VM), as much as a whole idle
    # executor's reading (<= 0.065 % of a second) when the sweeps fell inside it.
    idle0 = [proc_cpu_seconds(p) for p in pids]
    t_idle = time.perf_counter()
    exec_idle0 = proc_cpu_seconds(me)
    time.sleep(idle_s)
    exec_idle1 = proc_cpu_seconds(me)
    idle_wall = time.perf_counter() - t_idle
    idle = [(proc_cpu_seconds(p) - c) / idle_wall * 100 for p, c in zip(pids, idle0)]
    exec_idle = (exec_idle1 - exec_idle0) / idle_wall * 100
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
        "mode": "async" if prep.iters > 0 else "sync",
        "steps": steps,
        "p50_us": q(lat, 0.5),
        "p99_us": q(lat, 0.99),
        "overhead_p50_us": q(over, 0.5),
        "overhead_p99_us": q(over, 0.99),
        "executor_cpu_pct": exec_cpu,
        "worker_cpu_pct": worker_cpu,
        "worker_idle_cpu_pct": idle,
        "executor_idle_cpu_pct": exec_idle,
        "breakdown_p50_us": {k: statistics.median(t[k] for t in parts) for k in parts[0]},
        **cpu_lost(parts),
        "executor_sleeps_per_step": exec_sleeps,
        "worker_sleeps_per_step": worker_sleeps,
        "_speed": speed,  # classified once every run is in (classify_full_speed); not written to the JSON
        "_parts": parts,  # every measured step's breakdown: pooled by speed (classify_full_speed), --dump-steps
    }


# Where one step's time goes, from timestamps taken in the same run (CLOCK_MONOTONIC in every process):
# the executor's enqueue (pickling, copy into the transport, waking the workers); until the first and
# the last collected worker returned from its receive (its wake-up and unpickling); the critical
# worker's work (the last to reply); from its reply call until the executor has every reply (pickling
# and copying the reply, waking the executor, unpickling, returning from collect). The four from
# "enqueue" on add up to the step's latency; everything but the work is overhead. A worker may have the
# request before the enqueue call returned (it then continues to wake the others): then negative.
# With --trace, the pickling inside those parts too (pickle_clock.py): the request's pickling (in the
# enqueue), its unpickling by the critical worker (in "last worker has it"), the reply's pickling and the
# replies' unpickling (in "reply -> collected"); what is left of the overhead is the transport's.
def step_breakdown(n0, n1, n_prep, n2, replies, request_pickle_ns, unpickled, prep_stalled=0.0):
    """Timestamps (CLOCK_MONOTONIC, every process): n0/n1 around the enqueue, n_prep the end of the
    async preparation (n1 in sync mode), n2 when the replies were collected; each reply carries its
    work's thread CPU time (r[1], s), when its worker had the request (r[3]), sent its reply (r[4]),
    and how long it unpickled the request (r[5], ns; 0 untraced). The executor's pickling of the
    request (ns), its unpickling calls of the step, (start, duration) in ns (none untraced), and how
    long the preparation stalled (us: its wall time less its thread CPU time; 0 in sync mode)."""
    received = [r[3] for r in replies]
    critical = max(replies, key=lambda r: r[4])  # the last reply sent decides when collect can return
    # When each worker had the request, after the enqueue returned: by rank (is one worker, or its
    # CPU, always the late one?) and in order of arrival (does each further worker add a fixed step?).
    arrival = {f"has_it_rank{r[2]}": (r[3] - n1) / 1e3 for r in replies}
    arrival.update({f"has_it_{k}": (t - n1) / 1e3 for k, t in enumerate(sorted(received), 1)})
    return {
        **arrival,
        "enqueue": (n1 - n0) / 1e3,
        "first_worker_has_it": (min(received) - n1) / 1e3,
        "last_worker_has_it": (critical[3] - n1) / 1e3,
        "work": (critical[4] - critical[3]) / 1e3,
        "reply_to_collected": (n2 - critical[4]) / 1e3,
        # Async: the step's tail. Negative: the last reply was sent before the preparation ended.
        "last_reply_after_prep": (critical[4] - n_prep) / 1e3,
        # From when both the preparation and the last reply were done until the replies were in hand:
        # what the collect itself cost on the critical path (in sync mode: reply_to_collected).
        "collected_after_both": (n2 - max(n_prep, critical[4])) / 1e3,
        # Time the critical work spent runnable but not running (wall less its thread's CPU time): on a
        # CPU taken by another process, or (a)'s preparation waiting for the GIL its collector thread
        # holds. Both are fixed amounts of CPU work, so whatever they lost the step waited for.
        "work_stalled": (critical[4] - critical[3]) / 1e3 - critical[1] * 1e6,
        "prep_stalled": prep_stalled,
        "request_pickle": request_pickle_ns / 1e3,
        "request_unpickle": critical[5] / 1e3,
        # only what came after the critical reply was sent is on the step's critical path
        "replies_unpickle": sum(took for start, took in unpickled if start >= critical[4]) / 1e3,
    }


# A step "lost a CPU on its critical path" when the executor stalled (runnable, not running) in its
# preparation for longer than CPU_LOST_US — well above a timer tick or a kernel thread's turn (a few us),
# well below a neighbour's share of the CPU (a worker's work, ~1 ms) — or went on with its enqueue more
# than SLOW_PART_US after a worker already had the request: what is left of an enqueue once it published
# (waking the others) takes microseconds, so it lost its CPU, to a worker it woke (an enqueue that waits
# for ring space before it publishes is not counted: that is back-pressure, not a CPU); or, when the
# critical worker's reply came after the preparation ended (always, in sync mode), that worker's work
# stalled more than CPU_LOST_US or it had the request more than SLOW_PART_US after the enqueue — several
# times a hand-over with a CPU at hand (10-90 us on either machine, wake-up and unpickling included): it
# waited for a CPU another held (on the 2-core VM, the other worker's work, whose CFS slice is longer
# than that work). A worker that lost its CPU but still replied before the preparation ended cost the
# step nothing. Where processes outnumber CPUs (the 2-core VM: executor + 2 workers) the scheduler's
# placement decides how often; no transport chooses it.
CPU_LOST_US = 50.0
SLOW_PART_US = 200.0


def critical_cpu_loss(t):
    """How long a step's critical path went without a CPU (us; above, 0 or below CPU_LOST_US: it did not)."""
    def slow(v):
        return v if v > SLOW_PART_US else 0.0
    executor = max(t["prep_stalled"], slow(-t["first_worker_has_it"]))
    worker = max(t["work_stalled"], slow(t["last_worker_has_it"])) if t["last_reply_after_prep"] > 0 else 0.0
    return max(executor, worker)


def cpu_lost(parts):
    """Per run, from the steps' breakdowns: the share of steps that lost a CPU on their critical path
    (critical_cpu_loss), and both groups' steps — overhead, and for those that lost one how long —
    kept as lists to be pooled per configuration (summarize)."""
    lost, kept = [], []
    for t in parts:
        loss = critical_cpu_loss(t)
        (lost.append([loss, t["overhead"]]) if loss > CPU_LOST_US else kept.append(t["overhead"]))
    return {"cpu_lost_share": len(lost) / max(1, len(parts)), "cpu_lost_steps": lost, "cpu_kept_steps_overhead_us": kept}


def plot(rows, floors, cpp_floor_us, path):
    """Left: overhead p50 per configuration (bar: median; dots: each run), the Python floor of each
    group as a dashed line, the C++ floor (if given) as a dotted one. Right: what it costs in CPU, busy
    (executor + mean worker, % of one core) and idle (worst worker in the second after the last step)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib missing: no plot)")
        return
    colors = {"a": "#c0392b", "b": "#2980b9", "c": "#27ae60", "d": "#8e44ad", "e": "#7f8c8d", "f": "#d35400", "g": "#16a085"}
    names = {r["kind"]: r["variant"] for r in rows}
    labels = [f"{r['kind']} {r['replies']}\n{r['mode']}" for r in rows]
    x = list(range(len(rows)))
    fig, (ax, cx) = plt.subplots(1, 2, figsize=(15, 5), gridspec_kw={"width_ratios": [3, 2]})
    ax.bar(x, [max(r["overhead_p50_us"], 1.0) for r in rows], color=[colors[r["kind"]] for r in rows], alpha=0.8)
    for xi, r in zip(x, rows):
        ax.plot([xi] * len(r["overhead_p50_us_runs"]), [max(v, 1.0) for v in r["overhead_p50_us_runs"]], "k.", ms=4)
    for (mode, replies), v in floors.items():
        group = [xi for xi, r in zip(x, rows) if r["mode"] == mode and r["replies"] == replies]
        if group:
            ax.hlines(v, min(group) - 0.4, max(group) + 0.4, colors="k", linestyles="dashed", lw=1)
    ax.plot([], [], "k--", lw=1, label="Python floor (pickling alone)")
    if cpp_floor_us:
        ax.axhline(cpp_floor_us, color="grey", ls=":", lw=1.2, label=f"C++ floor ({cpp_floor_us:.1f} us)")
    ax.plot([], [], "k.", label="each run")
    ax.set_yscale("log")
    ax.set_xticks(x, labels, fontsize=7)
    ax.set_ylabel("step overhead p50 (us, log)")
    ax.set_title("overhead per step (lower is better)")
    ax.legend(fontsize=7, loc="upper left")
    kinds = [k for k in "abcdefg" if k in names]
    busy = [statistics.mean(r["executor_cpu_pct"] + statistics.mean(r["worker_cpu_pct"]) for r in rows if r["kind"] == k)
            for k in kinds]
    idle = [max(max(r["worker_idle_cpu_pct"]) for r in rows if r["kind"] == k) for k in kinds]
    w = 0.38
    cx.bar([i - w / 2 for i in range(len(kinds))], busy, w, color=[colors[k] for k in kinds], label="busy: executor + worker")
    cx.bar([i + w / 2 for i in range(len(kinds))], [max(v, 0.01) for v in idle], w, color=[colors[k] for k in kinds],
           hatch="//", alpha=0.5, label="idle worker")
    def percent(v):  # "100%", "0.13%": never matplotlib's "1e+02%"
        return f"{v:.0f}%" if v >= 10 else f"{v:.2g}%"

    for i, (b, v) in enumerate(zip(busy, idle)):
        cx.text(i - w / 2, b * 1.15, percent(b), ha="center", fontsize=7)
        cx.text(i + w / 2, max(v, 0.01) * 1.15, percent(v), ha="center", fontsize=7)
    cx.set_yscale("log")
    cx.set_xticks(range(len(kinds)), [names[k] for k in kinds], fontsize=7, rotation=12)
    cx.set_ylabel("CPU, % of one core (log)")
    cx.set_title("what it costs: CPU while stepping and while idle")
    cx.legend(fontsize=7, loc="center right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    as_palette_png(path)
    print(f"plot: {path}")


def as_palette_png(path):
    """Rewrites a plot as a 256-colour palette PNG: ~40 % of the size, the same picture to the eye (a few
    flat colours and their antialiased edges). Result folders keep a plot each, and every byte of the
    repository travels with a copy of the tree to the machines that run these benchmarks. Pillow comes
    with matplotlib."""
    from PIL import Image

    # The enum's name since Pillow 9.1, the module constant before it. (Without a palette given, the
    # median cut makes one and dithers nothing.)
    method = Image.Quantize.MEDIANCUT if hasattr(Image, "Quantize") else Image.MEDIANCUT
    with Image.open(path) as im:
        palette = im.convert("RGB").quantize(colors=256, method=method)
    palette.save(path, optimize=True)


def python_floor(workers, reply_all, overlapped, steps=300):
    """The Python work on a step's critical path that every variant pays, whatever its transport:
    pickling the request, one worker unpickling it (the workers do so in parallel), one reply pickled,
    and the executor unpickling every collected reply — in async mode (`overlapped`) only the
    executor's part, the workers' part runs during the preparation. Measured in this process, no
    transport, no waits; the median per step in us. No transport's overhead can go below it."""
    n_replies = workers if reply_all else 1
    per_step = []
    for step in range(1, steps + 1):
        request = scheduler_output(step)
        reply = pickle.dumps((step, 0.001, 0), protocol=5)
        t0 = time.perf_counter()
        wire = pickle.dumps(request, protocol=5)
        if not overlapped:
            pickle.loads(wire)
            reply = pickle.dumps((step, 0.001, 0), protocol=5)
        for _ in range(n_replies):
            pickle.loads(reply)
        per_step.append(time.perf_counter() - t0)
    return statistics.median(per_step) * 1e6


SCALARS = ("p50_us", "p99_us", "overhead_p50_us", "overhead_p99_us", "executor_cpu_pct")

# The VM's speed episodes (docs/platform.md, "Python's speed episodes"): on the 16-core machine a CPU
# runs Python at one of two speeds, the slower ~1.6-1.8x, in episodes of tens of ms to seconds that
# come and go with no relation to the process, to sleeping or spinning, or to this machine's own load
# (a latency-bound C loop does not see them). Every Python cost of a step (pickling above all) scales
# with the speed of the CPU it runs on, so a run's overhead depends on how much of it fell in slow
# episodes, in every variant alike, and a cell's median over a few runs is partly that draw. To show
# the transports against each other without that draw, each measured step records how fast the
# executor's CPU ran a fixed 10 us of the calibrated Python (SPEED_PROBE, just before the step's clock
# starts) and how long the preparation and the critical worker's fixed work took (CPU time). A step
# ran at full speed when the executor's probe and preparation were each within 1.3x of their 10th
# percentile over the whole showdown (every run of every variant: the fast speed); the slow speed is
# >= 1.6x. The executor runs most of a step's Python (the request's pickling, the replies'
# unpickling, the harness); the critical worker's (unpickling the request, pickling its reply) is
# left in, and how often its work ran at full speed is shown beside.
SPEED_PROBE = Compute(0)
FULL_SPEED_WITHIN = 1.3


def classify_full_speed(all_runs):
    """Adds to every run its share of full-speed steps (the executor's probe, and in async mode its
    preparation, within FULL_SPEED_WITHIN of their fastest tenth: the executor's Python, where most of a
    step's overhead runs, at full speed) and their overhead p50 (None under 10 such steps); and how often
    the critical worker's work ran at full speed."""
    def p10(values):
        values = sorted(v for v in values if v > 0)
        return values[len(values) // 10] if values else 0.0
    refs = {k: p10(v for r in all_runs for v in r["_speed"][k]) for k in ("executor", "worker", "prep")}
    for r in all_runs:
        sp = r.pop("_speed")
        full = [all(ref == 0 or v <= FULL_SPEED_WITHIN * ref for v, ref in ((e, refs["executor"]), (p, refs["prep"])))
                for e, p in zip(sp["executor"], sp["prep"])]
        # Every step's breakdown with its class and what decided it (us): pooled per configuration by
        # summarize (full_speed_overhead_p50_us, full_speed_breakdown_p50_us), written by --dump-steps.
        steps = r.pop("_parts")
        for t, f, e, w, p in zip(steps, full, sp["executor"], sp["worker"], sp["prep"]):
            t.update(full_speed=f, executor_probe_us=e * 1e6, critical_work_cpu_us=w * 1e6, prep_cpu_us=p * 1e6)
        r["_steps"] = steps
        fast = [t["overhead"] for t in steps if t["full_speed"]]
        # How often the critical worker's work ran at full speed: shown, not selected on (the critical worker
        # is the last to reply, the slowest of W, so an all-rank step would rarely qualify at all).
        r["worker_full_speed_share"] = sum(w <= FULL_SPEED_WITHIN * refs["worker"] for w in sp["worker"]) / max(1, len(sp["worker"]))
        r["full_speed_share"] = len(fast) / max(1, len(steps))
        r["full_speed_overhead_p50_us"] = statistics.median(fast) if len(fast) >= 10 else None
    return refs


def summarize(runs):
    """One row per configuration: the median over the repeated runs of every number, the runs kept."""
    row = {k: runs[0][k] for k in ("variant", "kind", "replies", "mode", "steps")}
    for k in SCALARS:
        row[k] = statistics.median(r[k] for r in runs)
    row["worker_cpu_pct"] = [statistics.median(v) for v in zip(*(r["worker_cpu_pct"] for r in runs))]
    row["worker_idle_cpu_pct"] = [max(v) for v in zip(*(r["worker_idle_cpu_pct"] for r in runs))]  # worst
    row["executor_idle_cpu_pct"] = max(r["executor_idle_cpu_pct"] for r in runs)  # worst
    row["breakdown_p50_us"] = {k: statistics.median(r["breakdown_p50_us"][k] for r in runs)
                               for k in runs[0]["breakdown_p50_us"]}
    row["overhead_p50_us_runs"] = [r["overhead_p50_us"] for r in runs]
    # The steps that ran at full speed (classify_full_speed), pooled over the runs (None under 10): their
    # overhead p50, and each part of a step on them alone — what a part costs when the executor's CPU ran
    # at full speed (a variant's slow episodes otherwise show as its parts).
    fast = [t for r in runs for t in r.get("_steps", ()) if t["full_speed"]]
    enough = len(fast) >= 10
    row["full_speed_overhead_p50_us"] = statistics.median(t["overhead"] for t in fast) if enough else None
    row["full_speed_breakdown_p50_us"] = (
        {k: statistics.median(t[k] for t in fast) for k in fast[0] if k != "full_speed"} if enough else None)
    row["full_speed_share"] = len(fast) / max(1, sum(r["steps"] for r in runs))
    # The steps that lost a CPU and those that kept theirs (cpu_lost), pooled over the runs likewise.
    kept = [o for r in runs for o in r.pop("cpu_kept_steps_overhead_us", [])]
    lost = [s for r in runs for s in r.pop("cpu_lost_steps", [])]
    row["cpu_kept_overhead_p50_us"] = statistics.median(kept) if len(kept) >= 10 else None
    row["cpu_lost_overhead_p50_us"] = statistics.median(o for _, o in lost) if len(lost) >= 10 else None
    row["cpu_lost_stall_p50_us"] = statistics.median(st for st, _ in lost) if len(lost) >= 10 else None
    row["cpu_lost_share"] = len(lost) / max(1, len(lost) + len(kept))
    ex = [r["executor_sleeps_per_step"] for r in runs if r["executor_sleeps_per_step"] is not None]
    row["executor_sleeps_per_step"] = statistics.median(ex) if ex else None
    wk = [w for r in runs for w in r["worker_sleeps_per_step"] if w is not None]
    row["worker_sleeps_per_step"] = statistics.median(wk) if wk else None
    row["runs"] = runs
    return row


def targets_for(cpus, workers):
    """The targets of this machine's setting: (c) / (a) overhead bounds per mode, and the all / single
    bound (None: none). With a CPU for every thread that runs a step (the executor's two — its
    preparation and the spinner's or (b)'s collecting thread — and one per worker, as --pin places
    them: the 16-core machine at W=2 and 8) no one waits for another's CPU; where they share CPUs
    (the 2-core machine: executor + 2 workers on 2) every hand-over may, and the targets are the
    looser ones of that setting, with no aggregation target."""
    if cpus >= workers + 2:
        return {"setting": f"{cpus} CPUs for {workers + 1} processes", "sync": 0.8, "async": 0.33, "all_single": 1.10}
    return {"setting": f"{cpus} CPUs shared by {workers + 1} processes", "sync": 1.0, "async": 0.5, "all_single": None}


def transport_allowance(bound, base, ours):
    """What a (c) / (a) bound leaves ringcast's transport in a traced sync cell, in µs: the bound times the
    spinner's overhead, less ringcast's own pickling on the step's critical path (the same object's in both
    designs) — against the transport share ringcast took and the spinner's. Medians of parts over the
    runs: they need not add up to the overhead p50."""
    b_ours, b_base = ours["breakdown_p50_us"], base["breakdown_p50_us"]
    allowed = bound * base["overhead_p50_us"] - b_ours["pickling"]
    took = b_ours["overhead_but_pickling"]
    share = took / b_base["overhead_but_pickling"] if b_base["overhead_but_pickling"] > 0 else float("nan")
    # No verdict here: the ratio's met / MISSED above is the target's; these medians of parts only say how
    # the transport's share compares with what the bound leaves it.
    return (f"with (c)'s pickling ({b_ours['pickling']:.1f} us; (a)'s {b_base['pickling']:.1f}), {bound} x (a) leaves "
            f"(c)'s transport {allowed:.1f} us; it took {took:.1f} ({share:.2f}x (a)'s {b_base['overhead_but_pickling']:.1f}; "
            f"medians of parts)")


def aggregation_allowance(bound, single, agg, floor_single, floor_all):
    """The all / single line in µs: how much longer (c)'s all-rank step was than its single-rank one,
    what the bound allows, and how much the Python floor grows between the two (its all-rank figure
    counts every reply's unpickling after the last one arrived, which ringcast's sync collect partly
    does while it waits: there it overstates)."""
    grew = agg["overhead_p50_us"] - single["overhead_p50_us"]
    allowed = (bound - 1) * single["overhead_p50_us"]
    floor_ratio = floor_all / floor_single if floor_single > 0 else float("nan")
    return (f"all-rank {grew:+.1f} us over single-rank, where the line allows {allowed:+.1f}; the Python floor alone "
            f"{floor_all - floor_single:+.1f} ({floor_ratio:.2f}x)")


def speed_matched_line(every_step, worker_ref_us, kind="c"):
    """The sync all / single of `kind` with the two cells matched on the critical worker's speed
    (all_single.py's view: an all-rank step waits for the slowest of W vCPUs, whose own Python of the
    step runs slow in the VM's speed episodes too), its full speed `worker_ref_us` (classify_full_speed's
    reference), or None where it cannot be said."""
    def columns(replies):
        runs = []
        for run in every_step:
            if run["kind"] == kind and run["mode"] == "sync" and run["replies"] == replies and run["steps"]:
                runs.append({k: [t[k] for t in run["steps"]] for k in ("overhead", "critical_work_cpu_us", "last_worker_has_it")})
        return runs
    single, every = columns("single"), columns("all")
    if not single or not every:
        return None
    try:
        m = speed_matched(single, every, worker_ref_us)
    except DumpError:
        return None
    if m is None or m["overhead_single_reweighted_p50_us"] is None:
        return None
    full = m["classes"][0]
    covered, reweighted = m["overhead_all_covered_p50_us"], m["overhead_single_reweighted_p50_us"]
    return (f"matched on the critical worker's speed (bench/showdown/all_single.py): {covered:.1f} / {reweighted:.1f} us = "
            f"{covered / reweighted:.2f} (coverage {m['coverage']:.0%} of the all-rank steps; the critical worker at full "
            f"speed in {full['single_share']:.0%} of single-rank and {full['all_share']:.0%} of all-rank steps)")


def targets_on(find, key, label, targets):
    """The targets' ratios again, on a subset of the steps: each row's pooled overhead p50 `key`."""
    for mode in ("sync", "async"):
        for replies in ("single", "all"):
            base, ours = find("a", replies, mode), find("c", replies, mode)
            if base and ours and base[key] and ours[key]:
                print(f"  [{mode}, {replies}] {label}: (c) / (a) = {ours[key] / base[key]:.2f} "
                      f"(target <= {targets[mode]})")
        single, agg = find("c", "single", mode), find("c", "all", mode)
        if single and agg and single[key] and agg[key]:
            bound = targets["all_single"]
            print(f"  [{mode}] {label}: (c) all / single = {agg[key] / single[key]:.2f} "
                  f"({'no target here' if bound is None else f'target <= {bound}'})")


def kept_cpu_targets(rows):
    """The targets again, on the steps whose critical path kept its CPUs (cpu_lost), pooled over the runs:
    where processes share CPUs, what the transports do apart from where the scheduler put whom."""
    print("the same on the steps whose critical path kept its CPUs (pooled over the runs; 'what the critical path"
          " lost' above; overhead p50, us, and the share of steps that lost one):")
    for r in rows:
        if r["kind"] in "ac":
            v = r["cpu_kept_overhead_p50_us"]
            print(f"  {r['variant']:<30} {r['replies']:<7} {r['mode']:<5} {'-' if v is None else f'{v:.1f}':>7} us, "
                  f"lost one in {r['cpu_lost_share'] * 100:3.0f}% of steps")


def full_speed_targets(rows, speed_refs, find, targets):
    """The targets again, on the steps that ran at full speed (classify_full_speed)."""
    print(f"\nthe same on the steps whose executor ran at full speed (the VM's speed episodes: its probe and"
          f" preparation each within\n{FULL_SPEED_WITHIN}x of their fastest tenth over this showdown,"
          f" {speed_refs['executor'] * 1e6:.1f} / {speed_refs['prep'] * 1e6:.0f} us; pooled over the runs; share:"
          f" of the measured steps; the critical\nworker's work at full speed (within {FULL_SPEED_WITHIN}x of"
          f" {speed_refs['worker'] * 1e6:.0f} us) in the share of steps after 'worker'):")
    for r in rows:
        v = r["full_speed_overhead_p50_us"]
        per_run = " ".join("-" if x["full_speed_overhead_p50_us"] is None else f"{x['full_speed_overhead_p50_us']:.0f}"
                           for x in r["runs"])
        print(f"  {r['variant']:<30} {r['replies']:<7} {r['mode']:<5} overhead p50 "
              f"{'-' if v is None else f'{v:.1f}':>7} us, {r['full_speed_share'] * 100:3.0f}% of steps; per run {per_run}; "
              f"worker {statistics.mean(x['worker_full_speed_share'] for x in r['runs']) * 100:3.0f}%")
    targets_on(find, "full_speed_overhead_p50_us", "full speed", targets)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=3, help="runs per configuration, interleaved; medians reported")
    ap.add_argument("--work-ms", type=float, default=1.0)
    ap.add_argument("--prep-ms", type=float, default=2.0, help="async mode: main thread's preparation work")
    ap.add_argument("--variants", default="abcd",
                    help="which of a-g to run (e: pure spin, f: no wake-ahead, g: another collect spin cap; only when asked)")
    ap.add_argument("--g-spin-max-us", type=float, default=2000.0, help="(g)'s cap on the collect's adaptive spin")
    ap.add_argument("--g-queue-spin-max-us", type=float, default=None,
                    help="(g)'s cap on the workers' adaptive spin (default: the library's)")
    ap.add_argument("--out", default="build/report")
    ap.add_argument("--idle-seconds", type=float, default=1.0, help="length of the idle-CPU window (tests shorten it)")
    ap.add_argument("--pin", choices=("auto", "on", "off", "shared"), default="auto",
                    help="pin the executor to 2 CPUs and each worker to its own (auto: when there are enough); "
                         "shared: fewer CPUs than processes, the executor alone on one, the workers on the rest")
    ap.add_argument("--trace", action="store_true",
                    help="also time the pickling inside every part of a step (pickle_clock.py): the overhead "
                         "left once it is taken out is the transport's")
    ap.add_argument("--dump-steps", action="store_true",
                    help="also write every measured step's breakdown (us), its executor probe and whether it ran at "
                         "full speed, per run and by column, to steps.json.gz under --out (the table keeps medians only)")
    ap.add_argument("--settle-others", action="store_true",
                    help="single-rank sync steps: every worker replies and the executor collects the other ranks' "
                         "replies after each step, off the clock, so that every step starts with all W workers "
                         "waiting, as an all-rank step does (what the all / single difference is made of)")
    ap.add_argument("--import-torch", action="store_true",
                    help="import torch in the executor before anything else (the workers are forked from it), as "
                         "every process of an inference engine has it: ringcast's enqueue then pickles with its "
                         "device pickler (docs/gpu.md); the spinner's pickle.dumps is the same either way")
    ap.add_argument("--cpp-floor-us", type=float, default=None,
                    help="the C++ floor's overhead p50 (ringcast-showdown-floor), drawn as a line in the plot")
    args = ap.parse_args()
    if args.import_torch and args.trace:
        # With torch loaded, enqueue pickles with the device pickler inside the binding, not through the
        # pickle.dumps that --trace replaces: its pickling would go untimed, and counted as transport.
        ap.error("--trace cannot time enqueue's pickling with torch loaded (--import-torch): use one or the other")
    if args.import_torch:
        import torch  # noqa: F401  (ImportError where torch is not installed: said, not skipped)
    os.makedirs(args.out, exist_ok=True)
    RingcastGatherCollectCap.gather_options = {"spin_max_us": args.g_spin_max_us}
    g_name = f"(g) ringcast + gather, collect spin cap {args.g_spin_max_us / 1e3:g} ms"
    if args.g_queue_spin_max_us is not None:
        RingcastGatherCollectCap.queue_options = {"spin_max_us": args.g_queue_spin_max_us}
        g_name += f", workers' {args.g_queue_spin_max_us / 1e3:g} ms"
    RingcastGatherCollectCap.name = g_name
    # Calibrated before the executor is pinned: on every CPU of this process, at the fastest.
    work, prep, no_prep = Compute(args.work_ms / 1e3), Compute(args.prep_ms / 1e3), Compute(0)
    global SPEED_PROBE, SETTLE_OTHERS
    SETTLE_OTHERS = args.settle_others
    SPEED_PROBE = Compute(10e-6)
    cpus_for_the_run = len(os.sched_getaffinity(0))  # before the executor pins itself to its own
    plan, pin_text = plan_pinning(args.pin, args.workers)
    if plan:
        PINNING.update(plan)
        os.sched_setaffinity(0, plan["executor"])
    print(f"CPU pinning: {pin_text}", flush=True)
    if args.trace:
        pickle_clock.install(TRACED_PICKLERS)

    configs = [(prep_c, reply_all, kind) for prep_c in (no_prep, prep) for reply_all in (False, True)
               for kind in args.variants]
    runs = {c: [] for c in configs}
    for rep in range(args.repeats):  # interleaved: a slow minute of the machine hits every variant alike
        for c in configs:
            prep_c, reply_all, kind = c
            r = run_variant(kind, args.workers, args.steps, work, reply_all, prep_c, args.idle_seconds)
            runs[c].append(r)
            print(f"  run {rep + 1}/{args.repeats} {r['variant']:<30} {r['replies']:<6} {r['mode']:<5} "
                  f"p50 {r['p50_us']:9.1f} us  overhead p50 {r['overhead_p50_us']:8.1f} us", flush=True)
    speed_refs = classify_full_speed([r for c in configs for r in runs[c]])
    rows = [summarize(runs[c]) for c in configs]
    every_step = [{k: r[k] for k in ("variant", "kind", "replies", "mode")} | {"run": i + 1, "steps": r.pop("_steps")}
                  for c in configs for i, r in enumerate(runs[c])]
    if args.dump_steps:
        # By column (one list per part, a run's steps in order), to 10 ns: a 5-run showdown stays ~1 MB.
        dumped = []
        for run in every_step:
            steps = run["steps"]
            dumped.append(dict(run, steps={k: [t[k] if isinstance(t[k], bool) else round(t[k], 2) for t in steps]
                                           for k in (steps[0] if steps else ())}))
        path = os.path.join(args.out, "steps.json.gz")
        with gzip.open(path, "wt") as f:
            json.dump({"speed_refs_us": {k: v * 1e6 for k, v in speed_refs.items()}, "runs": dumped,
                       "settle_others": args.settle_others, "pinning": pin_text}, f)
        print(f"steps: {path}", flush=True)
    floors = {(mode, replies): python_floor(args.workers, replies == "all", mode == "async")
              for mode in ("sync", "async") for replies in ("single", "all")}

    print()
    print(f"executor showdown — {args.workers} workers, {args.steps} steps (+warm-up) x {args.repeats} runs "
          f"(medians), worker work {args.work_ms} ms, async prep {args.prep_ms} ms; {platform.node()}, "
          f"{os.cpu_count()} CPUs, {time.strftime('%Y-%m-%d')}; pinning {pin_text}"
          f"{'; torch loaded in every process' if 'torch' in sys.modules else ''}")
    if args.settle_others:
        print("--settle-others: in single-rank sync steps every worker replied; the other ranks' replies were "
              "collected after each step, off the clock")
    hdr = f"{'variant':<30} {'replies':<7} {'mode':<5} {'p50 us':>9} {'p99 us':>9} {'ovh p50':>9} {'ovh p99':>9} " \
          f"{'exec CPU%':>9} {'worker CPU%':>12} {'idle CPU%':>10} {'exec idle%':>10}  ovh p50 per run"
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        spread = " ".join(f"{v:.0f}" for v in r["overhead_p50_us_runs"])
        print(f"{r['variant']:<30} {r['replies']:<7} {r['mode']:<5} {r['p50_us']:9.1f} {r['p99_us']:9.1f} "
              f"{r['overhead_p50_us']:9.1f} {r['overhead_p99_us']:9.1f} {r['executor_cpu_pct']:9.1f} "
              f"{statistics.mean(r['worker_cpu_pct']):12.1f} {max(r['worker_idle_cpu_pct']):10.2f} {r['executor_idle_cpu_pct']:10.2f}  {spread}")
    print("python floor (pickling on the critical path, no transport): " +
          ", ".join(f"{m} {r} {floors[m, r]:.1f} us" for m, r in floors))

    print("\nwhere a sync step's time goes (p50 of each part, us; medians over runs; the last collected"
          " worker is the critical one;\nsleeps/step: kernel sleeps per step of a worker's receive and of the"
          " executor's collect, median over workers and runs — 0 means the wait always spun, - not counted;\na"
          " predicted wait's alarm counts as one: a step longer than the collect's spin cap (10 ms; (g): its own) shows ~1 however it ends):")
    def breakdown_table(mode, header, line, key="breakdown_p50_us"):
        """One line per row of `mode`, from its breakdown `key` (the parts of a sync step do not apply to
        an async one, whose preparation overlaps the workers, and the other way round)."""
        print(header)
        print("-" * len(header))
        for r in rows:
            if r["mode"] == mode:
                print(line(r, r[key]) if r[key] else f"{r['variant']:<30} {r['replies']:<7} (under 10 such steps)")

    def sl(v):
        return "-" if v is None else f"{v:.2f}"
    breakdown_table(
        "sync",
        f"{'variant':<30} {'replies':<7} {'enqueue':>8} {'1st worker':>10} {'last worker':>11} {'work':>8} "
        f"{'reply->collected':>16} {'sleeps/step: worker':>19} {'executor':>8}",
        lambda r, b: f"{r['variant']:<30} {r['replies']:<7} {b['enqueue']:8.1f} {b['first_worker_has_it']:10.1f} "
                     f"{b['last_worker_has_it']:11.1f} {b['work']:8.1f} {b['reply_to_collected']:16.1f} "
                     f"{sl(r['worker_sleeps_per_step']):>19} {sl(r['executor_sleeps_per_step']):>8}")

    # The request's arrival at each worker of an all-rank sync step (p50 us after the enqueue returned,
    # medians over runs): by rank, with the CPU it was pinned to, and by order of arrival.
    all_sync = [r for r in rows if r["mode"] == "sync" and r["replies"] == "all"]
    if all_sync and args.workers > 1:
        cpus = PINNING["workers"] or [None] * args.workers
        print("\nwhen each worker had the request in an all-rank sync step (p50 us after the enqueue returned,"
              " medians over runs):\nby rank (its CPU when pinned), then by order of arrival (1st .. last):")
        print(f"{'variant':<30} " + " ".join(f"{'r%d@%s' % (i, c if c is not None else '-'):>7}" for i, c in zip(range(args.workers), cpus)))
        for r in all_sync:
            b = r["breakdown_p50_us"]
            print(f"{r['variant']:<30} " + " ".join(f"{b.get(f'has_it_rank{i}', float('nan')):7.1f}" for i in range(args.workers)))
        print(f"{'variant':<30} " + " ".join(f"{'#%d' % k:>7}" for k in range(1, args.workers + 1)))
        for r in all_sync:
            b = r["breakdown_p50_us"]
            print(f"{r['variant']:<30} " + " ".join(f"{b.get(f'has_it_{k}', float('nan')):7.1f}" for k in range(1, args.workers + 1)))

    if args.trace:
        print("\nthe same sync step with its pickling taken out (--trace; p50 us, medians over runs): the request's"
              " pickling (in the enqueue),\nits unpickling by the critical worker (in 'last worker'), the reply's"
              " pickling and the replies' unpickling (in 'reply->collected');\n'rest': the transport's share of"
              " each part (copy, publish, wake-up, the calls around them); the overhead's rest is the transport's")
        trace_header = (
            f"{'variant':<30} {'replies':<7} {'enqueue: pickle':>15} {'rest':>6} {'last worker: unpickle':>21} "
            f"{'rest':>6} {'reply->collected: pickle':>24} {'unpickle':>8} {'rest':>6} {'overhead: pickling':>18} "
            f"{'rest':>6}")
        def trace_line(r, b):
            return (f"{r['variant']:<30} {r['replies']:<7} {b['request_pickle']:15.1f} "
                    f"{b['enqueue_but_pickling']:6.1f} {b['request_unpickle']:21.1f} "
                    f"{b['worker_has_it_but_unpickling']:6.1f} {b['reply_pickle']:24.1f} "
                    f"{b['replies_unpickle']:8.1f} {b['collected_but_pickling']:6.1f} {b['pickling']:18.1f} "
                    f"{b['overhead_but_pickling']:6.1f}")
        breakdown_table("sync", trace_header, trace_line)
        if PINNING["workers"] and not PINNING["shared"]:
            # A variant whose runs drew more of the VM's slow episodes shows slower pickling and a slower
            # rest alike: the same split on the steps whose executor ran at full speed tells the two apart.
            print("\nthe same on the steps whose executor ran at full speed (p50 us, pooled over the runs; see the"
                  " full-speed view below; the\ncritical worker's and its reply's parts are in whatever speed its CPU had):")
            breakdown_table("sync", trace_header, trace_line, key="full_speed_breakdown_p50_us")

    print("\nwhere an async step's tail goes (p50 of each part, us; medians over runs): the enqueue, until the"
          " last collected worker\nhas the request, when it sent its reply against the end of the preparation"
          " (negative: before it), and how\nlong the collect took once both were done (the replies' copies,"
          " unpickling and wake-up on the critical path):")
    breakdown_table(
        "async",
        f"{'variant':<30} {'replies':<7} {'enqueue':>8} {'last worker':>11} {'last reply - prep end':>21} "
        f"{'collected after both':>20}",
        lambda r, b: f"{r['variant']:<30} {r['replies']:<7} {b['enqueue']:8.1f} {b['last_worker_has_it']:11.1f} "
                     f"{b['last_reply_after_prep']:21.1f} {b['collected_after_both']:20.1f}")

    print(f"\nwhat the critical path lost (p50 us, medians over runs): the critical worker's work and the async"
          f" preparation stalled\n(runnable, not running: its CPU taken by another process, or the GIL by another"
          f" thread of the executor); the steps whose critical path\nlost a CPU (the preparation stalled more than"
          f" {CPU_LOST_US:.0f} us, or the enqueue went on more than {SLOW_PART_US:.0f} us after a worker had the request;"
          f" the\ncritical worker's work stalled so or its hand-over took more than {SLOW_PART_US:.0f} us, where its reply"
          f" came after the preparation):\nshare, per run; pooled over the runs, how long they lost it and their overhead"
          f" p50; and the overhead p50 of the others, pooled:")
    hdr = (f"{'variant':<30} {'replies':<7} {'mode':<5} {'work stalled':>12} {'prep stalled':>12} "
           f"{'steps lost':>10} {'stalled':>8} {'ovh p50':>8} {'ovh p50 of the rest':>19}  lost per run")
    print(hdr)
    print("-" * len(hdr))
    def us(v):
        return "-" if v is None else f"{v:.1f}"
    for r in rows:
        b = r["breakdown_p50_us"]
        per_run = " ".join(f"{x['cpu_lost_share'] * 100:.0f}%" for x in r["runs"])
        print(f"{r['variant']:<30} {r['replies']:<7} {r['mode']:<5} {b['work_stalled']:12.1f} {b['prep_stalled']:12.1f} "
              f"{r['cpu_lost_share'] * 100:9.0f}% {us(r['cpu_lost_stall_p50_us']):>8} {us(r['cpu_lost_overhead_p50_us']):>8} "
              f"{us(r['cpu_kept_overhead_p50_us']):>19}  {per_run}")

    # Targets, as ratios measured in this run.
    def find(kind, replies, mode):
        return next((r for r in rows if r["kind"] == kind and r["replies"] == replies and r["mode"] == mode), None)

    targets = targets_for(cpus_for_the_run, args.workers)
    # The full-speed figures mean what they say only with every process on a CPU of its own.
    full_speed_view = bool(PINNING["workers"]) and not PINNING["shared"]
    print(f"\ntargets ({targets['setting']}; this run, medians; (c) = the library's defaults against (a) of the same"
          " run):")
    for mode in ("sync", "async"):
        bound = targets[mode]
        for replies in ("single", "all"):
            base, ours = find("a", replies, mode), find("c", replies, mode)
            if base and ours:
                ratio = ours["overhead_p50_us"] / max(base["overhead_p50_us"], 1e-9)
                print(f"  [{mode}, {replies}] (c) / (a) overhead p50 = {ratio:.2f} (target <= {bound}): "
                      f"{'met' if ratio <= bound else 'MISSED'}; the Python floor alone is "
                      f"{floors[mode, replies] / max(base['overhead_p50_us'], 1e-9):.2f} of (a)")
                if mode == "sync" and args.trace:
                    print("    " + transport_allowance(bound, base, ours))
        single, agg = find("c", "single", mode), find("c", "all", mode)
        if single and agg:
            ratio = agg["overhead_p50_us"] / max(single["overhead_p50_us"], 1e-9)
            if targets["all_single"] is None:
                print(f"  [{mode}] (c) all / single overhead p50 = {ratio:.2f} (no target where processes share CPUs)")
            else:
                print(f"  [{mode}] (c) all / single overhead p50 = {ratio:.2f} (target <= {targets['all_single']}): "
                      f"{'met' if ratio <= targets['all_single'] else 'MISSED'}")
                print("    " + aggregation_allowance(targets["all_single"], single, agg,
                                                     floors[mode, "single"], floors[mode, "all"]))
                matched = (speed_matched_line(every_step, speed_refs["worker"] * 1e6)
                           if mode == "sync" and full_speed_view else None)
                if matched:
                    print("    " + matched)
    if not full_speed_view:  # oversubscribed: sharing a CPU, not the VM's episodes, decides a step's speed
        print("\n(the same on the steps that ran at full speed: only with every process on a CPU of its own, --pin)")
        kept_cpu_targets(rows)
        targets_on(find, "cpu_kept_overhead_p50_us", "kept CPUs", targets)
    else:
        full_speed_targets(rows, speed_refs, find, targets)
    ours_rows = [r for r in rows if r["kind"] in "bcd"]  # (e) burns idle cores by design
    if ours_rows:
        for who, worst in (("worker", max(max(r["worker_idle_cpu_pct"]) for r in ours_rows)),
                           ("executor", max(r["executor_idle_cpu_pct"] for r in ours_rows))):
            print(f"  ringcast idle {who} CPU, worst = {worst:.2f}% (target <= 0.2%): "
                  f"{'met' if worst <= 0.2 else 'MISSED'}")

    with open(os.path.join(args.out, "showdown.json"), "w") as f:
        json.dump({"workers": args.workers, "steps": args.steps, "repeats": args.repeats, "work_ms": args.work_ms,
                   "prep_ms": args.prep_ms, "cpus": os.cpu_count(), "targets": targets, "pinning": pin_text, "date": time.strftime("%Y-%m-%d"),
                   "python_floor_us": {f"{m} {r}": v for (m, r), v in floors.items()},
                   "cpp_floor_us": args.cpp_floor_us, "torch_loaded": "torch" in sys.modules,
                   "settle_others": args.settle_others,
                   "full_speed_view": full_speed_view, "pinning_shared": PINNING["shared"], "rows": rows}, f, indent=1)
    print(f"json: {os.path.join(args.out, 'showdown.json')}")
    plot(rows, floors, args.cpp_floor_us, os.path.join(args.out, "showdown.png"))


if __name__ == "__main__":
    main()
