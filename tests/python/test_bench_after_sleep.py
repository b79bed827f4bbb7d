"""bench/python/bench_after_sleep.py end to end on a tiny budget: every pause, every kind once per round
in a rotated order, and each printed figure recomputed from the JSON's steps. Asserts structure and
arithmetic, never a speed."""
import json
import os
import re
import statistics
import subprocess
import sys

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                      "bench", "python", "bench_after_sleep.py")
KINDS = ("none", "spin", "sleep")


def test_the_after_sleep_probe_prints_what_its_steps_say(tmp_path):
    out_json = tmp_path / "after.json"
    out = subprocess.run([sys.executable, SCRIPT, "--pauses-ms", "0.02", "0.2", "--rounds", "4", "--steps", "5",
                          "--json", str(out_json)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    data = json.loads(out_json.read_text())
    lines = re.findall(r"^pause (\S+) ms: none (\S+), spin (\S+), sleep (\S+) us; sleep - spin (\S+) us "
                       r"\(rounds: ([^)]*)\)$", out.stdout, re.M)
    assert [float(x[0]) for x in lines] == [0.02, 0.2], out.stdout
    assert [e["pause_ms"] for e in data["by_pause"]] == [0.02, 0.2]
    for (_, none, spin, sleep, diff, rounds), entry in zip(lines, data["by_pause"]):
        steps = entry["steps_us"]
        orders = entry["orders"]
        assert len(orders) == 4 and all(sorted(o) == sorted(KINDS) for o in orders)
        assert len({tuple(o) for o in orders}) == 4, orders  # rotated, and reversed every other cycle
        assert all(len(steps[k]) == 4 and all(len(r) == 5 for r in steps[k]) for k in KINDS)
        pooled = {k: statistics.median([v for r in steps[k] for v in r]) for k in KINDS}
        assert [float(none), float(spin), float(sleep)] == [round(pooled[k], 1) for k in KINDS]
        assert float(diff) == round(pooled["sleep"] - pooled["spin"], 1)
        per_round = [statistics.median(s) - statistics.median(p) for s, p in zip(steps["sleep"], steps["spin"])]
        assert [float(x) for x in rounds.split()] == [round(d, 1) for d in per_round]


def test_the_after_sleep_probe_refuses_an_empty_budget():
    out = subprocess.run([sys.executable, SCRIPT, "--rounds", "0"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "--rounds and --steps must be >= 1" in out.stderr


def test_the_ring_waits_are_timed_and_compared_with_the_python_spin(tmp_path):
    """--ring: three more kinds, each a ringcast dequeue that times out after the pause (its strategy's
    own waiting), in the same rotation; each printed difference from the Python spin recomputed."""
    ring = ("ring-spin", "ring-yield", "ring-futex")
    kinds = KINDS + ring
    out_json = tmp_path / "ring.json"
    out = subprocess.run([sys.executable, SCRIPT, "--pauses-ms", "0.2", "--rounds", "6", "--steps", "3", "--ring",
                          "--json", str(out_json)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    data = json.loads(out_json.read_text())
    assert data["kinds"] == list(kinds)
    (entry,) = data["by_pause"]
    assert all(sorted(o) == sorted(kinds) for o in entry["orders"]) and len({tuple(o) for o in entry["orders"]}) == 6
    steps = entry["steps_us"]
    pooled = {k: statistics.median([v for r in steps[k] for v in r]) for k in kinds}
    (line,) = re.findall(r"^  ring waits: (.*)$", out.stdout, re.M)
    medians = dict(re.findall(r"(ring-\w+) (-?[\d.]+)(?:,| us)", line.split("; - spin ")[0] + " us"))
    assert {k: float(v) for k, v in medians.items()} == {k: round(pooled[k], 1) for k in ring}, line
    for k in ring:
        m = re.search(re.escape(k) + r" ([+-][\d.]+) \(rounds: ([^)]*)\)", line.split("; - spin ")[1])
        assert m, line
        assert float(m.group(1)) == round(pooled[k] - pooled["spin"], 1)
        per_round = [statistics.median(a) - statistics.median(b) for a, b in zip(steps[k], steps["spin"])]
        assert [float(x) for x in m.group(2).split()] == [round(d, 1) for d in per_round]


def test_a_ring_pause_lasts_its_timeout(monkeypatch):
    """The ring kinds really wait: a dequeue on the empty queue returns (timed out) no sooner than the
    pause (a lower bound: the timeout's own guarantee, not a speed)."""
    import time

    monkeypatch.syspath_prepend(os.path.join(os.path.dirname(SCRIPT), "..", "showdown"))
    monkeypatch.syspath_prepend(os.path.dirname(SCRIPT))
    import bench_after_sleep

    for wait in bench_after_sleep.RING_KINDS.values():
        w = bench_after_sleep.RingWait(wait)
        t0 = time.monotonic()
        w.pause(0.02)
        assert time.monotonic() - t0 >= 0.019, wait
        w.close()
