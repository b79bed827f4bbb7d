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


FAKE_NEIGHBOUR = """#!{python}
import os, sys, time
with open({log!r}, "a") as f:
    f.write(f"{{os.path.basename(sys.argv[0])}} {{sys.argv[1]}} {{sorted(os.sched_getaffinity(0))}}\\n")
print({says!r} or f"{{sys.argv[1]}} for {{sys.argv[2]}} s", flush=True)
if {exits_at_once!r}:
    sys.exit(0)  # a neighbour that ends during its cell
time.sleep(float(sys.argv[2]))
"""


def fake_neighbour(path, log, exits_at_once=False, says=""):
    """A stand-in for a ringcast-neighbour: logs its name, mode and CPUs, says what one says (or `says`),
    then waits its time (or not)."""
    path.write_text(FAKE_NEIGHBOUR.format(python=sys.executable, log=str(log), exits_at_once=exits_at_once,
                                          says=says))
    path.chmod(0o755)
    return str(path)


def test_together_runs_a_cell_on_every_neighbour_cpu_and_polite_from_runs_the_other_build(tmp_path):
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs 2 CPUs")
    neighbours = cpus[1:3]  # two where there are (a 2-CPU machine: one)
    listed = ",".join(map(str, neighbours))
    log = tmp_path / "calls.log"
    this = fake_neighbour(tmp_path / "this-build", log)
    other = fake_neighbour(tmp_path / "other-build", log)
    out_json = tmp_path / "probe.json"
    rounds = 3
    out = subprocess.run([sys.executable, SCRIPT, "--neighbour", this, "--work-cpu", str(cpus[0]), "--neighbour-cpus",
                          listed, "--together", "--modes", "pause,polite", "--polite-from", f"other={other}",
                          "--rounds", str(rounds), "--loops", "3", "--work-ms", "0.2", "--json", str(out_json)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    data = json.loads(out_json.read_text())
    assert data["together"] is True and data["polite_from"] == {"other": other} and data["neighbour"] == this
    modes = ["none", "pause", "polite", "polite@other"]  # the other build's cell beside this build's
    assert [(c["cpu"], c["cpus"], c["mode"]) for c in data["cells"]] == [("all", neighbours, m) for m in modes]
    cells = [f"all {m}" for m in modes]
    assert data["orders"] == [(cells[k // 2:] + cells[:k // 2])[::1 if k % 2 == 0 else -1] for k in range(rounds)]
    # Every cell with a neighbour started one on each neighbour CPU, through its own build's binary.
    calls = sorted(log.read_text().splitlines())
    want = sorted(f"{name} {mode} [{cpu}]" for name, mode in (("this-build", "pause"), ("this-build", "polite"),
                                                               ("other-build", "polite"))
                  for cpu in neighbours for _ in range(rounds))
    assert calls == want, calls
    assert f"one neighbour on each of CPUs {listed}, all at once" in out.stdout, out.stdout
    assert f"polite: the polite mode of {this}" in out.stdout and f"polite@other: the polite mode of {other}" in out.stdout
    for cell in data["cells"]:
        assert len(cell["work_us"]) == rounds and len(cell["over_none"]) == rounds, cell
        want_ratios = [v / b for v, b in zip(cell["work_us"], data["cells"][0]["work_us"])]
        assert all(abs(a - b) <= 1e-9 * b for a, b in zip(cell["over_none"], want_ratios)), cell
        assert re.search(rf"^CPU all {re.escape(cell['mode'])} +[\d. ]+median {cell['over_none_median']:.3f}$",
                         out.stdout, re.M), (cell, out.stdout)


def test_a_neighbour_that_ends_or_is_no_ringcast_neighbour_is_an_error(tmp_path):
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs 2 CPUs")
    quits = fake_neighbour(tmp_path / "quits", tmp_path / "calls.log", exits_at_once=True)
    out = subprocess.run([sys.executable, SCRIPT, "--neighbour", quits, "--work-cpu", str(cpus[0]), "--neighbour-cpus",
                          str(cpus[1]), "--modes", "pause", "--rounds", "1", "--loops", "150", "--work-ms", "1"],
                         capture_output=True, text=True, timeout=120)  # a cell of ~180 ms: it has ended by its end
    assert out.returncode == 1 and f"the pause neighbour on CPU {cpus[1]} ended during the cell" in out.stderr, out.stderr
    stranger = fake_neighbour(tmp_path / "stranger", tmp_path / "calls.log", says="hello")
    out = subprocess.run([sys.executable, SCRIPT, "--neighbour", stranger, "--work-cpu", str(cpus[0]),
                          "--neighbour-cpus", str(cpus[1]), "--modes", "pause", "--rounds", "1", "--loops", "3"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 1 and "is not a ringcast-neighbour (its first line: 'hello')" in out.stderr, out.stderr


@needs_neighbour
def test_polite_from_refuses_bad_labels_and_binaries():
    for bad, why in ((f"other{NEIGHBOUR}", "LABEL=BINARY"), (f"x y={NEIGHBOUR}", "LABEL=BINARY"),
                     (f"\u00e9={NEIGHBOUR}", "LABEL=BINARY"), ("other=/nonexistent/ringcast-neighbour",
                                                                 "/nonexistent/ringcast-neighbour is not an executable"),
                     ("other=/", "/ is not an executable")):
        done = run_probe("--polite-from", bad)
        assert done.returncode == 2 and why in done.stderr, (bad, done.stderr)
    done = run_probe("--polite-from", f"a={NEIGHBOUR}", "--polite-from", f"a={NEIGHBOUR}")
    assert done.returncode == 2 and "the label 'a' twice" in done.stderr, done.stderr
