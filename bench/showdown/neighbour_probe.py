#!/usr/bin/env python3
"""Does a waiter on one CPU slow the showdown's worker loop on another? The showdown's 1 ms of worker
work (showdown.Compute: pure Python, timed in thread CPU time) pinned to one CPU, beside a neighbour on
another CPU that waits one way (`ringcast-neighbour`: pause, the library's polite adaptive spin, a bare
yield loop, busy work; or a Python sched_yield poller, the spin-and-yield queue's way), or beside
nobody. The work's CPU time, not its wall time: a neighbour that slows it does so through the core
the two vCPUs share on the host (SMT siblings the guest may not see), not by taking its CPU.

Every round runs every (neighbour CPU, mode) once, in a rotated order reversed every other round, and
"none" — the work with no neighbour — once per neighbour CPU in that round, so each ratio is against
the same round's baseline (the VM's speed drifts between minutes). Prints each cell's median work per
round, its ratio to that round's baseline, and the median of the rounds' ratios.

    PYTHONPATH=build/python python3 bench/showdown/neighbour_probe.py \
        --neighbour build/bench/showdown/ringcast-neighbour [--work-cpu 2] [--neighbour-cpus 0,1,3]

By default the work runs where the showdown pins its worker 0 for 8 workers, and the neighbours where
it pins the executor (both CPUs) and worker 1.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from showdown import Compute, plan_pinning  # noqa: E402  (the showdown's own work loop and placement)

NEIGHBOUR_MODES = ("pause", "polite", "yield", "busy")  # ringcast-neighbour's
PY_POLLER = "pyyield"  # a Python loop of os.sched_yield(), as the spin-and-yield queue polls
ALL_MODES = ("none",) + NEIGHBOUR_MODES + (PY_POLLER,)


def default_cpus():
    """The showdown's placement for 8 workers: worker 0's CPU, and the executor's and worker 1's."""
    plan, _ = plan_pinning("auto", 8)
    if plan is None:
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) < 2:
            raise SystemExit("neighbour_probe: needs 2 CPUs")
        return cpus[0], [cpus[1]]
    return plan["workers"][0], sorted(plan["executor"]) + [plan["workers"][1]]


def start_neighbour(binary, mode, cpu, seconds):
    """The neighbour, pinned to `cpu`, waiting `mode`'s way for at most `seconds` (it is stopped sooner)."""
    if mode == PY_POLLER:
        argv = [sys.executable, "-c",
                "import os, sys, time\nend = time.monotonic() + float(sys.argv[1])\n"
                "print('pyyield', flush=True)\nwhile time.monotonic() < end:\n    os.sched_yield()\n", str(seconds)]
    else:
        argv = [binary, mode, str(seconds)]
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, preexec_fn=lambda: os.sched_setaffinity(0, {cpu}))
    try:
        started = p.stdout.readline()  # its one line: it waits now (not a Python neighbour still starting up)
    except BaseException:
        stop_neighbour(p)
        raise
    if not started:
        stop_neighbour(p)
        raise SystemExit(f"neighbour_probe: the {mode} neighbour exited at once (rc {p.returncode})")
    return p


def stop_neighbour(p):
    p.kill()
    p.wait()
    p.stdout.close()


def time_work(work, loops, gap_s):
    """The work's thread CPU time, µs, `loops` times, `gap_s` apart (the showdown's worker, between steps)."""
    out = []
    for _ in range(loops):
        out.append(work() * 1e6)
        time.sleep(gap_s)
    return statistics.median(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--neighbour", default="build/bench/showdown/ringcast-neighbour", help="the ringcast-neighbour binary")
    ap.add_argument("--work-cpu", type=int, default=None)
    ap.add_argument("--neighbour-cpus", default=None, help="comma-separated CPUs")
    ap.add_argument("--modes", default=",".join(ALL_MODES[1:]), help="of " + ",".join(ALL_MODES[1:]))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--loops", type=int, default=200, help="timed works per cell and round")
    ap.add_argument("--work-ms", type=float, default=1.0)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    if not modes or any(m not in ALL_MODES[1:] for m in modes):
        ap.error(f"--modes: each of {','.join(ALL_MODES[1:])}")
    if args.rounds < 1 or args.loops < 1 or not args.work_ms > 0:
        ap.error("--rounds, --loops and --work-ms must be positive")
    if len(set(modes)) != len(modes):
        ap.error("--modes: each mode once")
    neighbour_cpus = None
    if args.neighbour_cpus:
        try:
            neighbour_cpus = [int(c) for c in args.neighbour_cpus.split(",")]
        except ValueError:
            ap.error(f"--neighbour-cpus: comma-separated CPU numbers, not {args.neighbour_cpus!r}")
        if len(set(neighbour_cpus)) != len(neighbour_cpus):
            ap.error("--neighbour-cpus: each CPU once")
    work_cpu = args.work_cpu
    if work_cpu is None or neighbour_cpus is None:
        default_work, default_neighbours = default_cpus()
        work_cpu = default_work if work_cpu is None else work_cpu
        neighbour_cpus = default_neighbours if neighbour_cpus is None else neighbour_cpus
    allowed = os.sched_getaffinity(0)
    for c in [work_cpu] + neighbour_cpus:
        if c not in allowed:
            ap.error(f"CPU {c} is not one this process may use ({sorted(allowed)})")
    if work_cpu in neighbour_cpus:
        ap.error(f"the work's CPU {work_cpu} cannot also be a neighbour's")
    if any(m in NEIGHBOUR_MODES for m in modes) and not os.access(args.neighbour, os.X_OK):
        ap.error(f"--neighbour: {args.neighbour} is not an executable (build the ringcast_neighbour target)")

    gap_s = 0.2e-3
    cell_s = args.loops * (args.work_ms / 1e3 + gap_s) * 3 + 5  # the neighbour's own limit (checked: not reached)
    if cell_s > 3600:
        ap.error("--loops x --work-ms: a cell would run longer than the neighbour's limit of an hour")

    os.sched_setaffinity(0, {work_cpu})
    work = Compute(args.work_ms / 1e3)  # calibrated on the work's CPU alone, with no neighbour
    cells = [(c, m) for c in neighbour_cpus for m in ["none"] + modes]
    work_us = {cell: [] for cell in cells}  # [round]
    orders = []  # [round]: the cells in the order run
    for k in range(args.rounds):
        order = cells[k // 2 % len(cells):] + cells[:k // 2 % len(cells)]
        orders.append(order if k % 2 == 0 else order[::-1])
        for cpu, mode in orders[-1]:
            p = None if mode == "none" else start_neighbour(args.neighbour, mode, cpu, cell_s)
            try:
                work_us[(cpu, mode)].append(time_work(work, args.loops, gap_s))
                if p is not None and p.poll() is not None:  # part of the cell ran with no neighbour
                    raise SystemExit(f"neighbour_probe: the {mode} neighbour on CPU {cpu} ended during the cell "
                                     f"(rc {p.returncode})")
            finally:
                if p is not None:
                    stop_neighbour(p)
            print(f"  round {k + 1}: CPU {cpu} {mode}: {work_us[(cpu, mode)][-1]:.1f} us", file=sys.stderr)

    print(f"neighbour probe: the showdown's {args.work_ms:g} ms of worker work on CPU {work_cpu}, thread CPU time "
          f"(median of {args.loops} per cell and round), beside a neighbour on CPU "
          f"{','.join(map(str, neighbour_cpus))}; {args.rounds} rounds, each cell once per round, its ratio to "
          f"the same round's work with no neighbour")
    print(f"{'neighbour':<16} {'work us, round 1..N':<{8 * args.rounds}}  x none, round 1..N, then the median")
    result = []
    for cpu, mode in cells:
        base = work_us[(cpu, "none")]
        ratios = [v / b for v, b in zip(work_us[(cpu, mode)], base)]
        print(f"{f'CPU {cpu} {mode}':<16} " + "".join(f"{v:8.1f}" for v in work_us[(cpu, mode)]) + "  "
              + " ".join(f"{r:.3f}" for r in ratios) + f"  median {statistics.median(ratios):.3f}")
        result.append({"cpu": cpu, "mode": mode, "work_us": work_us[(cpu, mode)], "over_none": ratios,
                       "over_none_median": statistics.median(ratios)})
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"work_cpu": work_cpu, "work_ms": args.work_ms, "loops": args.loops, "rounds": args.rounds,
                       "cells": result, "orders": [[f"{c} {m}" for c, m in o] for o in orders]}, f)


if __name__ == "__main__":
    main()
