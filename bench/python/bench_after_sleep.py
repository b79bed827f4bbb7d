#!/usr/bin/env python3
"""What a sleep costs the Python that runs right after it: the showdown's per-step Python on the
executor's critical path (the request pickled, one worker's unpickling of it, one reply pickled and
unpickled: showdown.python_floor's step), timed (wall clock) at once after a pause of D of one of
these kinds, on one pinned CPU:

  spin     a busy loop of D: the CPU never idles (what a spinning executor does during a step)
  sleep    time.sleep(D): the thread leaves the CPU; with nothing else to run it idles, and a VM's
           vCPU halts (what a sleeping executor does during a step)
  none     no pause: the step right after the previous one (the warm reference)

The kinds alternate in rounds, their order rotated each round, so a slow stretch of the machine
falls on every kind alike. Per D: each kind's median step, and sleep - spin: what waiting asleep
instead of spinning adds to the Python after it — the caches, TLB and branch predictors the CPU lost
while it idled (or the host gave it away), refilled on the step's critical path. No transport
involved: a pause here is what any wait's strategy leaves behind.

Nothing here is a pass/fail; it prints what it saw (text, and JSON with every step with --json).
"""

import argparse
import json
import os
import pickle
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "showdown"))
from showdown import scheduler_output  # noqa: E402  (the showdown's own request)

KINDS = ("none", "spin", "sleep")


def spin(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def python_step(step):
    """showdown.python_floor's step with one reply: the Python every variant runs per step."""
    wire = pickle.dumps(scheduler_output(step), protocol=5)
    pickle.loads(wire)
    reply = pickle.dumps((step, 0.001, 0), protocol=5)
    pickle.loads(reply)


def timed_step(step, kind, pause_s):
    if kind == "spin":
        spin(pause_s)
    elif kind == "sleep":
        time.sleep(pause_s)
    t0 = time.perf_counter_ns()
    python_step(step)
    return (time.perf_counter_ns() - t0) / 1e3


def run(pauses_ms, rounds, steps, cpu):
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    for step in range(200):  # warm the interpreter's paths before anything is timed
        python_step(step)
    out = {"pauses_ms": pauses_ms, "rounds": rounds, "steps": steps, "cpu": cpu, "by_pause": []}
    for pause_ms in pauses_ms:
        per_kind = {k: [] for k in KINDS}
        orders = []
        for r in range(rounds):
            order = KINDS[r % len(KINDS):] + KINDS[:r % len(KINDS)]
            if r // len(KINDS) % 2:
                order = tuple(reversed(order))
            orders.append(list(order))
            for kind in order:
                per_kind[kind].append([timed_step(i, kind, pause_ms / 1e3) for i in range(steps)])
        out["by_pause"].append({"pause_ms": pause_ms, "orders": orders, "steps_us": per_kind})
    return out


def summarize(result):
    """Per pause: each kind's median step (over every step of every round), each round's medians,
    and sleep - spin from the pooled medians and per round."""
    lines = []
    for entry in result["by_pause"]:
        med = {k: statistics.median([v for rnd in entry["steps_us"][k] for v in rnd]) for k in KINDS}
        rounds = {k: [statistics.median(rnd) for rnd in entry["steps_us"][k]] for k in KINDS}
        diff_rounds = [s - p for s, p in zip(rounds["sleep"], rounds["spin"])]
        entry["median_us"] = med
        entry["round_medians_us"] = rounds
        entry["sleep_minus_spin_us"] = med["sleep"] - med["spin"]
        entry["sleep_minus_spin_rounds_us"] = diff_rounds
        lines.append(f"pause {entry['pause_ms']:g} ms: none {med['none']:.1f}, spin {med['spin']:.1f}, "
                     f"sleep {med['sleep']:.1f} us; sleep - spin {med['sleep'] - med['spin']:+.1f} us "
                     f"(rounds: {' '.join(f'{d:+.1f}' for d in diff_rounds)})")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pauses-ms", type=float, nargs="+", default=[0.05, 0.5, 2.0, 10.0])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--steps", type=int, default=100, help="steps per kind per round")
    ap.add_argument("--cpu", type=int, default=None, help="pin to this CPU (default: the last one we may use)")
    ap.add_argument("--json", help="write every step's time here")
    args = ap.parse_args()
    if args.rounds < 1 or args.steps < 1 or any(p <= 0 for p in args.pauses_ms):
        ap.error("--rounds and --steps must be >= 1 and every pause > 0")
    cpu = args.cpu if args.cpu is not None else max(os.sched_getaffinity(0))
    result = run(args.pauses_ms, args.rounds, args.steps, cpu)
    print(f"the showdown's per-step Python after a pause, wall clock, CPU {cpu}, {args.rounds} rounds x "
          f"{args.steps} steps per kind (medians over all steps)")
    for line in summarize(result):
        print(line)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f)


if __name__ == "__main__":
    main()
