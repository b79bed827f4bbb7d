#!/usr/bin/env python3
"""Does this machine run Python at one speed? The showdown's pure-Python work (the loop its workers run
as "the model step"), ~1 ms of it at a time, timed as thread CPU time, in three settings (and a
fourth on request):

  processes  fresh processes, one after another, pinned round robin: each one's p10 / p50 / p90 — a
             speed that belongs to the process (its memory layout, ASLR) differs between processes
             and stays within one
  pauses     one process, a pause before every loop: none, a 1 ms spin, sleeps of 20 us .. 5 ms — a
             speed drawn when a CPU halts (a VM's idle vCPU) changes after sleeps, not after spins
  load       one process while k of the other CPUs run the same loop — a speed that this machine's
             own load sets (vCPUs sharing a host core) falls as k grows
  imports    (--imports torch,numpy) fresh processes, alternated: nothing imported, then each module;
             each one times the loop and pickling a step's request (what an executor does per step) —
             a slowdown that a module brings (torch's libraries, its threads) shows in every process
             that imports it, an episode in some processes of every kind

A loop is "slow" above --slow-above x the fastest tenth of all loops of this run. On the 16-core VM
(docs/platform.md, "Python's speed episodes") none of the three explained it: every setting shows both
speeds, ~1.6-1.8x apart, in episodes. Nothing here is a pass/fail; it prints what it saw.
"""

import argparse
import importlib.util
import multiprocessing as mp
import os
import pickle
import subprocess
import sys
import time


def work(n):
    x = 0
    for i in range(n):
        x += i
    return x


def timed_loops(n, count, pause=None):
    """Thread CPU time (us) of `count` loops of work(n), `pause()` before each."""
    out = []
    for _ in range(count):
        if pause is not None:
            pause()
        t0 = time.thread_time_ns()
        work(n)
        out.append((time.thread_time_ns() - t0) / 1e3)
    return out


def calibrate(ms):
    n, best = 20000, float("inf")
    for _ in range(5):
        t0 = time.thread_time()
        work(n)
        best = min(best, time.thread_time() - t0)
    return max(1, int(n * ms / 1e3 / best))


def step_request(step):
    """The showdown's request of one step, ~2 KB pickled: a copy of bench/showdown/showdown.py's
    scheduler_output (tests/python/test_bench_speed_episodes.py holds them equal), not an import of it —
    the showdown imports ringcast, and the imports setting's "nothing imported" process must not."""
    ids = [f"req-{100000 + step}-{i}" for i in range(32)]
    return {"step": step, "req_ids": ids, "num_scheduled_tokens": {r: (i * 7) % 13 + 1 for i, r in enumerate(ids)},
            "block_ids": [[step + i * 16 + j for j in range(16)] for i in range(16)], "finished": []}


def timed_picklings(count):
    """Wall time (us) of `count` picklings and unpicklings of a step's request and of a reply."""
    out = []
    for step in range(count):
        request = step_request(step)
        t0 = time.perf_counter_ns()
        pickle.loads(pickle.dumps(request, protocol=5))
        pickle.loads(pickle.dumps((step, 0.001, 0), protocol=5))
        out.append((time.perf_counter_ns() - t0) / 1e3)
    return out


def busy(us):
    end = time.perf_counter_ns() + int(us * 1000)
    while time.perf_counter_ns() < end:
        pass


def quantiles(v):
    s = sorted(v)
    return s[len(s) // 10], s[len(s) // 2], s[len(s) * 9 // 10]


class Verdict:
    """Slow share and speed changes of a series, against the run's fastest tenth (set once it is known)."""

    def __init__(self, slow_above):
        self.slow_above = slow_above
        self.series = []

    def add(self, label, values):
        self.series.append((label, values))

    def print(self):
        every = sorted(v for _, vs in self.series for v in vs)
        fast = every[len(every) // 10]
        limit = self.slow_above * fast
        print(f"  (fastest tenth {fast:.0f} us; slow: above {limit:.0f} us)")
        for label, vs in self.series:
            slow = [v > limit for v in vs]
            changes = sum(a != b for a, b in zip(slow, slow[1:]))
            slow_v = sorted(v for v in vs if v > limit)
            fast_v = sorted(v for v in vs if v <= limit)
            p10, p50, p90 = quantiles(vs)
            print(f"  {label:<28} p10 {p10:6.0f} p50 {p50:6.0f} p90 {p90:6.0f} us; slow {sum(slow):4d}/{len(vs)}, "
                  f"speed changes {changes:3d}; p50 fast {fast_v[len(fast_v) // 2] if fast_v else 0:6.0f} "
                  f"slow {slow_v[len(slow_v) // 2] if slow_v else 0:6.0f}")


CHILD = """
import os, sys, time
sys.path.insert(0, {here!r})
from bench_speed_episodes import timed_loops
os.sched_setaffinity(0, {{int(sys.argv[2])}})
print(" ".join(f"{{v:.1f}}" for v in timed_loops(int(sys.argv[1]), int(sys.argv[3]))))
"""


CHILD_IMPORT = """
import os, sys, time
sys.path.insert(0, {here!r})
os.sched_setaffinity(0, {{int(sys.argv[2])}})
t0 = time.perf_counter()
if sys.argv[4] != "nothing":
    __import__(sys.argv[4])
imported = time.perf_counter() - t0
from bench_speed_episodes import timed_loops, timed_picklings
print(f"{{imported:.2f}} {{len(os.listdir('/proc/self/task'))}}")
print(" ".join(f"{{v:.1f}}" for v in timed_loops(int(sys.argv[1]), int(sys.argv[3]))))
print(" ".join(f"{{v:.1f}}" for v in timed_picklings(int(sys.argv[3]) * 10)))
"""


def hog(cpu, n, stop):
    os.sched_setaffinity(0, {cpu})
    while not stop.is_set():
        work(n)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ms", type=float, default=1.0, help="length of one loop at the calibrated speed")
    ap.add_argument("--loops", type=int, default=300, help="loops per series")
    ap.add_argument("--processes", type=int, default=16, help="fresh processes in the first setting")
    ap.add_argument("--slow-above", type=float, default=1.35, help="slow: above this x the fastest tenth")
    ap.add_argument("--cpu", type=int, default=None, help="the CPU of the pauses and load settings")
    ap.add_argument("--imports", default="", help="comma-separated modules for the imports setting "
                    "(e.g. torch,numpy); none: the setting is skipped")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of the imports setting (each: every module "
                    "on two CPUs, alternated)")
    args = ap.parse_args()
    modules = [m for m in args.imports.split(",") if m]
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise SystemExit(f"--imports: no module named {', '.join(missing)} for {sys.executable}")
    cpus = sorted(os.sched_getaffinity(0))
    cpu = args.cpu if args.cpu is not None else cpus[min(3, len(cpus) - 1)]
    os.sched_setaffinity(0, {cpu})
    n = calibrate(args.ms)
    print(f"{len(cpus)} CPUs; {n} iterations per {args.ms} ms loop (best of 5 on CPU {cpu}); "
          f"python {sys.version.split()[0]}, {time.strftime('%Y-%m-%d %H:%M:%S')}")

    print(f"\nprocesses: {args.processes} fresh processes, {args.loops} loops each")
    v = Verdict(args.slow_above)
    child = CHILD.format(here=os.path.dirname(os.path.abspath(__file__)))
    for k in range(args.processes):
        c = cpus[k % len(cpus)]
        out = subprocess.run([sys.executable, "-c", child, str(n), str(c), str(args.loops)],
                             capture_output=True, text=True, check=True).stdout
        v.add(f"process {k} on CPU {c}", [float(x) for x in out.split()])
    v.print()

    print(f"\npauses: one process on CPU {cpu}, a pause before each of {args.loops} loops, two rounds")
    pauses = [("none", None), ("spin 1 ms", lambda: busy(1000))] + [
        (f"sleep {us} us", lambda us=us: time.sleep(us / 1e6)) for us in (20, 100, 300, 1000, 5000)]
    v = Verdict(args.slow_above)
    for rnd in range(2):
        for label, pause in pauses:
            v.add(f"{label} (round {rnd + 1})", timed_loops(n, args.loops, pause))
    v.print()

    others = [c for c in cpus if c != cpu]
    print(f"\nload: one process on CPU {cpu} while k other CPUs run the same loop, two rounds")
    v = Verdict(args.slow_above)
    for rnd in range(2):
        for k in sorted({0, 1, len(others) // 4, len(others) // 2, len(others)}):
            stop = mp.Event()
            hogs = [mp.Process(target=hog, args=(c, n, stop), daemon=True) for c in others[:k]]
            for h in hogs:
                h.start()
            time.sleep(0.1)
            try:
                v.add(f"{k:2d} others busy (round {rnd + 1})", timed_loops(n, args.loops))
            finally:
                stop.set()
                for h in hogs:
                    h.join()
    v.print()

    if modules:
        pair = [cpu, others[len(others) // 2] if others else cpu]
        print(f"\nimports: fresh processes on CPUs {pair[0]} and {pair[1]}, {args.rounds} rounds of: nothing "
              f"imported, {', '.join(modules)}; {args.loops} loops and {args.loops * 10} picklings of a step's "
              "request + a reply each")
        loops, picklings = Verdict(args.slow_above), Verdict(args.slow_above)
        child = CHILD_IMPORT.format(here=os.path.dirname(os.path.abspath(__file__)))
        for rnd in range(args.rounds):
            for module in ["nothing"] + modules:
                for c in pair:
                    run = subprocess.run([sys.executable, "-c", child, str(n), str(c), str(args.loops), module],
                                         capture_output=True, text=True)
                    if run.returncode != 0:  # e.g. a module that is there but fails to import
                        raise SystemExit(f"--imports: the process importing {module} failed:\n{run.stderr[-2000:]}")
                    out = run.stdout.splitlines()
                    imported, threads = out[0].split()
                    label = f"{module} on CPU {c} (round {rnd + 1})"
                    print(f"  {label}: import {imported} s, {threads} thread(s) after it")
                    loops.add(label, [float(x) for x in out[1].split()])
                    picklings.add(label, [float(x) for x in out[2].split()])
        print(" the loop (thread CPU time):")
        loops.print()
        print(" pickling (wall time):")
        picklings.print()


if __name__ == "__main__":
    main()
