#!/usr/bin/env python3
"""Does a waiter on one CPU slow the showdown's worker loop on another? The showdown's 1 ms of worker
work (showdown.Compute: pure Python, timed in thread CPU time) pinned to one CPU, beside a neighbour on
another CPU that waits one way (`ringcast-neighbour`: pause, the library's polite adaptive spin, a bare
yield loop, busy work; or a Python sched_yield poller, the spin-and-yield queue's way), or beside
nobody. The work's CPU time, not its wall time: a neighbour that slows it does so through the core
the two vCPUs share on the host (SMT siblings the guest may not see), not by taking its CPU.

Every round runs every (neighbour CPU, mode) once — with `--together`, every mode once on all the
neighbour CPUs at once — in a rotated order reversed every other round, and "none" (the work with no
neighbour) once per such place in that round, so each ratio is against the same round's baseline (the
VM's speed drifts between minutes). Prints each cell's median work per
round, its ratio to that round's baseline, and the median of the rounds' ratios.

    PYTHONPATH=build/python python3 bench/showdown/neighbour_probe.py \
        --neighbour build/bench/showdown/ringcast-neighbour [--work-cpu 2] [--neighbour-cpus 0,1,3] \
        [--together] [--polite-from LABEL=BINARY]

By default the work runs where the showdown pins its worker 0 for 8 workers, and the neighbours where
it pins the executor (both CPUs) and worker 1. `--together` runs each cell's neighbour on every one of
those CPUs at once (by default then: the executor's and workers 1-7's, as in a W=8 step where all of
them wait). On a machine too small for that placement (fewer than 10 CPUs) the work runs on the first
CPU and the neighbour on the second (`--together`: on every other CPU). A neighbour CPU given by
default is never the work's: with `--work-cpu` alone, that CPU leaves the default neighbours.
`--polite-from LABEL=BINARY` adds a cell `polite@LABEL`: another build's ringcast-neighbour in its
polite mode — a change to the library's spin A/B'd against this build's in the same rounds.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from showdown import Compute, plan_pinning  # noqa: E402  (the showdown's own work loop and placement)

NEIGHBOUR_MODES = ("pause", "polite", "yield", "busy")  # ringcast-neighbour's
PY_POLLER = "pyyield"  # a Python loop of os.sched_yield(), as the spin-and-yield queue polls
ALL_MODES = ("none",) + NEIGHBOUR_MODES + (PY_POLLER,)


def default_cpus(together):
    """The showdown's placement for 8 workers: worker 0's CPU, and the executor's and worker 1's (with
    `together`: and every other worker's)."""
    plan, _ = plan_pinning("auto", 8)
    if plan is None:
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) < 2:
            raise SystemExit("neighbour_probe: needs 2 CPUs")
        return cpus[0], cpus[1:] if together else [cpus[1]]
    return plan["workers"][0], sorted(plan["executor"]) + plan["workers"][1:None if together else 2]


def start_neighbour(binary, cell, cpu, seconds):
    """The neighbour, pinned to `cpu`, waiting the `cell` mode's way for at most `seconds` (it is stopped
    sooner). `binary` runs a NEIGHBOUR_MODES mode; a `polite@LABEL` cell passes its own build's binary."""
    mode = cell.partition("@")[0]
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
    if started.split()[:1] != [mode]:  # ringcast-neighbour prints "MODE for N s", the Python poller its name
        stop_neighbour(p)
        what = "exited at once" if not started else f"is not a ringcast-neighbour (its first line: {started.strip()!r})"
        raise SystemExit(f"neighbour_probe: the {cell} neighbour on CPU {cpu} ({argv[0]}) {what} (rc {p.returncode})")
    return p


def stop_neighbour(p):
    stop_neighbours([p])


def stop_neighbours(ps):
    """Kills them all first, then reaps each: an interrupt while one is reaped leaves none running."""
    for p in ps:
        p.kill()
    for p in ps:
        try:
            p.wait()
        finally:
            p.stdout.close()


def start_neighbours(binary, mode, cpus, seconds):
    """One neighbour on each of `cpus`; all of them stopped if one fails to start."""
    started = []
    try:
        for cpu in cpus:
            started.append(start_neighbour(binary, mode, cpu, seconds))
    except BaseException:
        stop_neighbours(started)
        raise
    return started


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
    ap.add_argument("--together", action="store_true",
                    help="each cell's neighbour on all the neighbour CPUs at once (default CPUs: the W=8 showdown's)")
    ap.add_argument("--polite-from", action="append", default=[], metavar="LABEL=BINARY",
                    help="a cell polite@LABEL: that ringcast-neighbour's polite mode (another build's spin)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    if not modes or any(m not in ALL_MODES[1:] for m in modes):
        ap.error(f"--modes: each of {','.join(ALL_MODES[1:])}")
    if args.rounds < 1 or args.loops < 1 or not args.work_ms > 0:
        ap.error("--rounds, --loops and --work-ms must be positive")
    if len(set(modes)) != len(modes):
        ap.error("--modes: each mode once")
    other_builds = {}  # label -> its ringcast-neighbour
    for spec in args.polite_from:
        label, sep, binary = spec.partition("=")
        if not sep or not binary or not re.fullmatch(r"[A-Za-z0-9_-]+", label):
            ap.error(f"--polite-from: LABEL=BINARY with a label of letters, digits, - or _, not {spec!r}")
        if label in other_builds:
            ap.error(f"--polite-from: the label {label!r} twice")
        if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
            ap.error(f"--polite-from: {binary} is not an executable")
        other_builds[label] = os.path.abspath(binary)
    # Each other build's cell right after this build's polite cell (where it runs): the pair side by side.
    at = modes.index("polite") + 1 if "polite" in modes else len(modes)
    modes[at:at] = [f"polite@{label}" for label in other_builds]
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
        default_work, default_neighbours = default_cpus(args.together)
        if neighbour_cpus is None:  # the defaults leave out a --work-cpu given among them
            neighbour_cpus = [c for c in default_neighbours if c != work_cpu]
            if not neighbour_cpus:
                ap.error(f"no default neighbour CPU besides the work's {work_cpu}: give --neighbour-cpus")
        work_cpu = default_work if work_cpu is None else work_cpu
    allowed = os.sched_getaffinity(0)
    for c in [work_cpu] + neighbour_cpus:
        if c not in allowed:
            ap.error(f"CPU {c} is not one this process may use ({sorted(allowed)})")
    if work_cpu in neighbour_cpus:
        ap.error(f"the work's CPU {work_cpu} cannot also be a neighbour's")
    if any(m in NEIGHBOUR_MODES for m in modes) and not (os.path.isfile(args.neighbour)
                                                         and os.access(args.neighbour, os.X_OK)):
        ap.error(f"--neighbour: {args.neighbour} is not an executable (build the ringcast_neighbour target)")

    gap_s = 0.2e-3
    cell_s = args.loops * (args.work_ms / 1e3 + gap_s) * 3 + 5  # the neighbour's own limit (checked: not reached)
    if cell_s > 3600:
        ap.error("--loops x --work-ms: a cell would run longer than the neighbour's limit of an hour")

    os.sched_setaffinity(0, {work_cpu})
    work = Compute(args.work_ms / 1e3)  # calibrated on the work's CPU alone, with no neighbour
    # A cell's place: one neighbour CPU, or "all" of them at once (--together).
    places = ["all"] if args.together else neighbour_cpus
    cpus_of = {place: neighbour_cpus if place == "all" else [place] for place in places}
    cells = [(c, m) for c in places for m in ["none"] + modes]
    work_us = {cell: [] for cell in cells}  # [round]
    orders = []  # [round]: the cells in the order run
    for k in range(args.rounds):
        order = cells[k // 2 % len(cells):] + cells[:k // 2 % len(cells)]
        orders.append(order if k % 2 == 0 else order[::-1])
        for place, mode in orders[-1]:
            binary = other_builds.get(mode.partition("@")[2], args.neighbour)
            ps = [] if mode == "none" else start_neighbours(binary, mode, cpus_of[place], cell_s)
            try:
                work_us[(place, mode)].append(time_work(work, args.loops, gap_s))
                for cpu, p in zip(cpus_of[place], ps):
                    if p.poll() is not None:  # part of the cell ran without this neighbour
                        raise SystemExit(f"neighbour_probe: the {mode} neighbour on CPU {cpu} ended during the cell "
                                         f"(rc {p.returncode})")
            finally:
                stop_neighbours(ps)
            print(f"  round {k + 1}: CPU {place} {mode}: {work_us[(place, mode)][-1]:.1f} us", file=sys.stderr)

    print(f"neighbour probe: the showdown's {args.work_ms:g} ms of worker work on CPU {work_cpu}, thread CPU time "
          f"(median of {args.loops} per cell and round), beside "
          + (f"one neighbour on each of CPUs {','.join(map(str, neighbour_cpus))}, all at once" if args.together
             else f"a neighbour on CPU {','.join(map(str, neighbour_cpus))}")
          + f"; {args.rounds} rounds, each cell once per round, its ratio to the same round's work with no neighbour")
    if other_builds:
        print(f"polite: the polite mode of {os.path.abspath(args.neighbour)}")
    for label, binary in other_builds.items():
        print(f"polite@{label}: the polite mode of {binary}")
    width = max(16, max(len(f"CPU {place} {mode}") + 1 for place, mode in cells))
    print(f"{'neighbour':<{width}} {'work us, round 1..N':<{8 * args.rounds}}  x none, round 1..N, then the median")
    result = []
    for place, mode in cells:
        base = work_us[(place, "none")]
        ratios = [v / b for v, b in zip(work_us[(place, mode)], base)]
        print(f"{f'CPU {place} {mode}':<{width}} " + "".join(f"{v:8.1f}" for v in work_us[(place, mode)]) + "  "
              + " ".join(f"{r:.3f}" for r in ratios) + f"  median {statistics.median(ratios):.3f}")
        result.append({"cpu": place, "cpus": cpus_of[place], "mode": mode, "work_us": work_us[(place, mode)],
                       "over_none": ratios, "over_none_median": statistics.median(ratios)})
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"work_cpu": work_cpu, "work_ms": args.work_ms, "loops": args.loops, "rounds": args.rounds,
                       "together": args.together, "neighbour": os.path.abspath(args.neighbour),
                       "polite_from": other_builds,
                       "cells": result, "orders": [[f"{c} {m}" for c, m in o] for o in orders]}, f)


if __name__ == "__main__":
    main()
