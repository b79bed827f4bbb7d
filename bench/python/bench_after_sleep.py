#!/usr/bin/env python3
"""What a sleep costs the Python that runs right after it: the showdown's per-step Python on the
executor's critical path (the request pickled, one worker's unpickling of it, one reply pickled and
unpickled: showdown.python_floor's step), timed (wall clock) at once after a pause of D of one of
these kinds, on one pinned CPU:

  spin     a busy loop of D: the CPU never idles (what a spinning executor does during a step)
  sleep    time.sleep(D): the thread leaves the CPU; with nothing else to run it idles, and a VM's
           vCPU halts (what a sleeping executor does during a step)
  none     no pause: the step right after the previous one (the warm reference)

With --ring, the same pause is also a ringcast wait that times out after D on an empty queue (a
reader's dequeue(timeout=D)), one per strategy: what the library's own waiting leaves behind, not a
Python loop's:

  ring-spin    wait="spin": a loop of the CPU's pause instruction (a hybrid wait's spin is this)
  ring-yield   wait="spin_yield": a loop of sched_yield calls (the spinner's way)
  ring-futex   wait="futex": asleep in the kernel (a hybrid wait past its spin is this)

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
RING_KINDS = {"ring-spin": "spin", "ring-yield": "spin_yield", "ring-futex": "futex"}


class RingWait:
    """An empty queue whose reader waits with one strategy: pause(D) is a dequeue that times out."""

    def __init__(self, wait):
        import ringcast

        self.writer = ringcast.MessageQueue(1, 1, wait=wait, max_chunk_bytes=1 << 14, max_chunks=4)
        self.reader = ringcast.MessageQueue.create_from_handle(self.writer.export_handle(), 0)

    def close(self):
        self.reader.shutdown()
        self.writer.shutdown()

    def pause(self, seconds):
        try:
            self.reader.dequeue(timeout=seconds)
        except TimeoutError:
            pass
        else:
            raise RuntimeError("a message came through a queue nobody writes")


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


def timed_step(step, kind, pause_s, rings):
    if kind == "spin":
        spin(pause_s)
    elif kind == "sleep":
        time.sleep(pause_s)
    elif kind in rings:
        rings[kind].pause(pause_s)
    t0 = time.perf_counter_ns()
    python_step(step)
    return (time.perf_counter_ns() - t0) / 1e3


def run(pauses_ms, rounds, steps, cpu, ring=False):
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    rings = {k: RingWait(w) for k, w in RING_KINDS.items()} if ring else {}
    kinds = KINDS + tuple(rings)
    for step in range(200):  # warm the interpreter's paths before anything is timed
        python_step(step)
    out = {"pauses_ms": pauses_ms, "rounds": rounds, "steps": steps, "cpu": cpu, "kinds": list(kinds),
           "by_pause": []}
    for pause_ms in pauses_ms:
        per_kind = {k: [] for k in kinds}
        orders = []
        for r in range(rounds):
            order = kinds[r % len(kinds):] + kinds[:r % len(kinds)]
            if r // len(kinds) % 2:
                order = tuple(reversed(order))
            orders.append(list(order))
            for kind in order:
                per_kind[kind].append([timed_step(i, kind, pause_ms / 1e3, rings) for i in range(steps)])
        out["by_pause"].append({"pause_ms": pause_ms, "orders": orders, "steps_us": per_kind})
    for r in rings.values():
        r.close()
    return out


def summarize(result):
    """Per pause: each kind's median step (over every step of every round), each round's medians,
    and sleep - spin from the pooled medians and per round."""
    lines = []
    kinds = result.get("kinds", KINDS)
    for entry in result["by_pause"]:
        med = {k: statistics.median([v for rnd in entry["steps_us"][k] for v in rnd]) for k in kinds}
        rounds = {k: [statistics.median(rnd) for rnd in entry["steps_us"][k]] for k in kinds}
        diff_rounds = [s - p for s, p in zip(rounds["sleep"], rounds["spin"])]
        entry["median_us"] = med
        entry["round_medians_us"] = rounds
        entry["sleep_minus_spin_us"] = med["sleep"] - med["spin"]
        entry["sleep_minus_spin_rounds_us"] = diff_rounds
        lines.append(f"pause {entry['pause_ms']:g} ms: none {med['none']:.1f}, spin {med['spin']:.1f}, "
                     f"sleep {med['sleep']:.1f} us; sleep - spin {med['sleep'] - med['spin']:+.1f} us "
                     f"(rounds: {' '.join(f'{d:+.1f}' for d in diff_rounds)})")
        ring = [k for k in kinds if k in RING_KINDS]
        if ring:  # each ringcast wait against the Python spin of the same length, pooled and per round
            entry["minus_spin_us"] = {k: med[k] - med["spin"] for k in ring}
            entry["minus_spin_rounds_us"] = {k: [a - b for a, b in zip(rounds[k], rounds["spin"])] for k in ring}
            lines.append("  ring waits: " + ", ".join(f"{k} {med[k]:.1f}" for k in ring) + " us; - spin " +
                         ", ".join(f"{k} {med[k] - med['spin']:+.1f} (rounds: " +
                                   " ".join(f"{d:+.1f}" for d in entry["minus_spin_rounds_us"][k]) + ")"
                                   for k in ring))
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pauses-ms", type=float, nargs="+", default=[0.05, 0.5, 2.0, 10.0])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--steps", type=int, default=100, help="steps per kind per round")
    ap.add_argument("--cpu", type=int, default=None, help="pin to this CPU (default: the last one we may use)")
    ap.add_argument("--json", help="write every step's time here")
    ap.add_argument("--ring", action="store_true", help="also pause in ringcast waits of each strategy (needs ringcast)")
    args = ap.parse_args()
    if args.rounds < 1 or args.steps < 1 or any(p <= 0 for p in args.pauses_ms):
        ap.error("--rounds and --steps must be >= 1 and every pause > 0")
    cpu = args.cpu if args.cpu is not None else max(os.sched_getaffinity(0))
    result = run(args.pauses_ms, args.rounds, args.steps, cpu, args.ring)
    print(f"the showdown's per-step Python after a pause, wall clock, CPU {cpu}, {args.rounds} rounds x "
          f"{args.steps} steps per kind (medians over all steps)")
    for line in summarize(result):
        print(line)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f)


if __name__ == "__main__":
    main()
