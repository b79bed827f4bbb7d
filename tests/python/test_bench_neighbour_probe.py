"""bench/showdown/neighbour_probe.py and ringcast-neighbour end to end on a tiny budget: every cell once
per round in a rotated order, each printed ratio recomputed from the JSON, bad input refused with its
cause, the neighbour's own limit kept. Asserts structure and arithmetic, never a speed."""
import json
import os
import re
import statistics
import subprocess
import sys
import time

import pytest

import ringcast

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "bench", "showdown", "neighbour_probe.py")
# The build tree's binary, beside the build tree's Python package (PYTHONPATH=<build>/python).
NEIGHBOUR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(ringcast.__file__)))),
                         "bench", "showdown", "ringcast-neighbour")
needs_neighbour = pytest.mark.skipif(not os.access(NEIGHBOUR, os.X_OK), reason="ringcast-neighbour not built here")


def run_probe(*args, timeout=120):
    return subprocess.run([sys.executable, SCRIPT, "--neighbour", NEIGHBOUR, *args], capture_output=True, text=True,
                          timeout=timeout)


@needs_neighbour
def test_the_probe_prints_what_its_rounds_say(tmp_path):
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs 2 CPUs")
    out_json = tmp_path / "probe.json"
    out = run_probe("--work-cpu", str(cpus[0]), "--neighbour-cpus", str(cpus[1]), "--modes", "pause,polite,pyyield",
                    "--rounds", "4", "--loops", "3", "--work-ms", "0.2", "--json", str(out_json))
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    data = json.loads(out_json.read_text())
    cells = [f"{cpus[1]} {m}" for m in ("none", "pause", "polite", "pyyield")]
    assert [f"{c['cpu']} {c['mode']}" for c in data["cells"]] == cells
    # Round k: the cells rotated by k // 2, reversed in every other round.
    want_orders = [(cells[k // 2:] + cells[:k // 2])[::1 if k % 2 == 0 else -1] for k in range(4)]
    assert data["orders"] == want_orders, data["orders"]
    base = data["cells"][0]["work_us"]
    rows = {m: (rest, float(med)) for m, rest, med in
            re.findall(r"^CPU \d+ (\w+) +([\d. ]+?)\s+median ([\d.]+)$", out.stdout, re.M)}
    assert list(rows) == ["none", "pause", "polite", "pyyield"], out.stdout
    for cell in data["cells"]:
        assert len(cell["work_us"]) == 4 and all(v > 0 for v in cell["work_us"]), cell
        want = [v / b for v, b in zip(cell["work_us"], base)]
        assert all(abs(a - b) <= 1e-9 * b for a, b in zip(cell["over_none"], want)), cell
        assert cell["over_none_median"] == statistics.median(want)
        printed = [float(x) for x in rows[cell["mode"]][0].split()]
        assert printed[:4] == [round(v, 1) for v in cell["work_us"]], (printed, cell)
        assert printed[4:] == [round(r, 3) for r in want], (printed, cell)
        assert rows[cell["mode"]][1] == round(statistics.median(want), 3), (rows, cell)
    assert data["cells"][0]["over_none"] == [1.0] * 4


@needs_neighbour
def test_the_probe_refuses_bad_input_with_its_cause():
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs 2 CPUs")
    out = run_probe("--modes", "pause,sleepy")
    assert out.returncode == 2 and "--modes" in out.stderr, out.stderr
    out = run_probe("--modes", "pause,pause")
    assert out.returncode == 2 and "each mode once" in out.stderr, out.stderr
    out = run_probe("--work-cpu", str(cpus[0]), "--neighbour-cpus", f"{cpus[1]},{cpus[1]}")
    assert out.returncode == 2 and "each CPU once" in out.stderr, out.stderr
    out = run_probe("--neighbour-cpus", "1,")
    assert out.returncode == 2 and "comma-separated CPU numbers" in out.stderr, out.stderr
    out = run_probe("--loops", "10000000")
    assert out.returncode == 2 and "limit of an hour" in out.stderr, out.stderr
    out = run_probe("--work-cpu", str(cpus[0]), "--neighbour-cpus", str(cpus[0]))
    assert out.returncode == 2 and "cannot also be a neighbour" in out.stderr, out.stderr
    out = run_probe("--work-cpu", "100000", "--neighbour-cpus", str(cpus[1]))
    assert out.returncode == 2 and "CPU 100000 is not one this process may use" in out.stderr, out.stderr
    out = subprocess.run([sys.executable, SCRIPT, "--neighbour", "/nonexistent/ringcast-neighbour", "--modes", "pause"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "/nonexistent/ringcast-neighbour is not an executable" in out.stderr, out.stderr


@needs_neighbour
def test_the_neighbour_waits_its_way_for_its_time_and_refuses_bad_arguments():
    for mode in ("pause", "polite", "yield", "busy"):
        t0 = time.monotonic()
        done = subprocess.run([NEIGHBOUR, mode, "0.05"], capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, (mode, done.stderr)
        assert time.monotonic() - t0 >= 0.05, mode  # it waited its time (a lower bound, not a speed)
    for argv, why in (([], "two arguments expected"), (["nap", "1"], "unknown MODE"), (["pause", "0"], "SECONDS"),
                      (["pause", "1x"], "SECONDS")):
        done = subprocess.run([NEIGHBOUR, *argv], capture_output=True, text=True, timeout=30)
        assert done.returncode == 2 and why in done.stderr, (argv, done.stderr)


@needs_neighbour
def test_together_runs_a_cell_on_every_neighbour_cpu_and_polite_from_adds_another_builds_cell(tmp_path):
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs 2 CPUs")
    neighbours = cpus[1:3]  # two where there are (a 2-CPU machine: one)
    listed = ",".join(map(str, neighbours))
    out_json = tmp_path / "probe.json"
    out = run_probe("--work-cpu", str(cpus[0]), "--neighbour-cpus", listed, "--together",
                    "--modes", "pause", "--polite-from", f"other={NEIGHBOUR}", "--rounds", "2", "--loops", "3",
                    "--work-ms", "0.2", "--json", str(out_json))
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    data = json.loads(out_json.read_text())
    assert data["together"] is True and data["polite_from"] == {"other": NEIGHBOUR}
    assert [(c["cpu"], c["cpus"], c["mode"]) for c in data["cells"]] == [
        ("all", neighbours, m) for m in ("none", "pause", "polite@other")]
    assert f"all of CPUs {listed} at once" in out.stdout, out.stdout
    assert f"polite@other: the polite mode of {NEIGHBOUR}" in out.stdout, out.stdout
    for cell in data["cells"]:
        want = [v / b for v, b in zip(cell["work_us"], data["cells"][0]["work_us"])]
        assert all(abs(a - b) <= 1e-9 * b for a, b in zip(cell["over_none"], want)), cell
        assert re.search(rf"^CPU all {re.escape(cell['mode'])} +[\d. ]+median {cell['over_none_median']:.3f}$",
                         out.stdout, re.M), (cell, out.stdout)
    for bad, why in ((f"other{NEIGHBOUR}", "LABEL=BINARY"), ("x y=/bin/true", "LABEL=BINARY"),
                     ("other=/nonexistent/ringcast-neighbour", "/nonexistent/ringcast-neighbour is not an executable")):
        done = run_probe("--polite-from", bad)
        assert done.returncode == 2 and why in done.stderr, (bad, done.stderr)
    done = run_probe("--polite-from", f"a={NEIGHBOUR}", "--polite-from", f"a={NEIGHBOUR}")
    assert done.returncode == 2 and "the label 'a' twice" in done.stderr, done.stderr
