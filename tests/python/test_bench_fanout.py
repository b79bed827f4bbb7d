"""bench/python/bench_fanout.py end to end on a tiny budget: every mode in every round, the wait mode's
cells with the last rank's hand-over, the summary's medians and differences recomputed from the rounds it
printed, and its refusals. Asserts structure and arithmetic, never a duration."""
import os
import re
import statistics
import subprocess
import sys

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                      "bench", "python", "bench_fanout.py")
NUM = r"(-?[\d.]+)"


def run(*args, ok=True):
    out = subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, timeout=120)
    if ok:
        assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return out


def test_every_mode_every_round_and_the_summary_follows_from_them():
    text = run("--workers", "3", "--rounds", "3", "--steps", "20", "--gap-us", "0", "--pin", "off").stdout
    rounds = {}
    for m in ("wait", "busy", "sleep"):
        line = re.search(rf"^  {m} +(.+)$", text, re.M)
        assert line, text
        cells = [c.split("/") for c in line.group(1).split()]
        assert len(cells) == 3, line.group(0)
        assert all(len(c) == (3 if m == "wait" else 2) for c in cells), line.group(0)  # the last rank: wait only
        rounds[m] = [[float(x) for x in c] for c in cells]
    assert all(c[2] >= c[1] for c in rounds["wait"]), rounds["wait"]  # rank 0 is among those the last bounds
    base = statistics.median(c[1] for c in rounds["sleep"])
    for m, cells in rounds.items():
        s = re.search(rf"^  {m} +enqueue {NUM} us, rank 0 had it {NUM} us \(([+-][\d.]+)\)(?:, the last rank {NUM})?$",
                      text, re.M)
        assert s, (m, text)
        assert abs(float(s.group(1)) - statistics.median(c[0] for c in cells)) <= 0.051
        had = statistics.median(c[1] for c in cells)
        assert abs(float(s.group(2)) - had) <= 0.051
        assert abs(float(s.group(3)) - (had - base)) <= 0.11
        assert (s.group(4) is not None) == (m == "wait")
        if m == "wait":
            assert abs(float(s.group(4)) - statistics.median(c[2] for c in cells)) <= 0.051


def test_refusals_name_the_option():
    out = run("--workers", "1", ok=False)
    assert out.returncode == 2 and "--workers must be >= 2" in out.stderr
    out = run("--steps", "5001", ok=False)
    assert out.returncode == 2 and "--steps 1..5000" in out.stderr
    n = len(os.sched_getaffinity(0))  # n workers need n + 1 CPUs: refused before any worker starts
    out = run("--workers", str(max(n, 2)), "--pin", "on", ok=False)
    assert out.returncode != 0 and f"--pin on needs {max(n, 2) + 1} CPUs" in (out.stdout + out.stderr)
