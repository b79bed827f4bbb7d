"""bench/python/bench_speed_episodes.py end to end on a tiny budget: all three settings, a line per series,
each series' loops counted as slow or not against the fastest tenth. Asserts structure, never a duration."""
import os
import re
import subprocess
import sys

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                      "bench", "python", "bench_speed_episodes.py")


def test_the_speed_episodes_probe_runs_every_setting_and_counts_every_loop():
    out = subprocess.run([sys.executable, SCRIPT, "--ms", "0.05", "--loops", "12", "--processes", "3"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    for heading in ("processes: 3 fresh processes", "pauses: one process", "load: one process"):
        assert heading in out.stdout, out.stdout
    series = re.findall(r"^  (.+?)\s+p10\s+\d+ p50\s+\d+ p90\s+\d+ us; slow\s+(\d+)/(\d+), speed changes\s+(\d+);",
                        out.stdout, re.M)
    labels = [s[0] for s in series]
    assert labels[:3] == [f"process {k} on CPU {c}" for k, c in
                          zip(range(3), [sorted(os.sched_getaffinity(0))[k % len(os.sched_getaffinity(0))]
                                         for k in range(3)])]
    assert "sleep 5000 us (round 2)" in labels and "spin 1 ms (round 1)" in labels
    assert any(label.startswith(" 0 others busy") or label.startswith("0 others busy") for label in labels)
    for _, slow, total, changes in series:
        assert int(total) == 12 and 0 <= int(slow) <= 12 and 0 <= int(changes) <= 11


def test_the_imports_setting_alternates_fresh_processes_and_refuses_a_missing_module():
    out = subprocess.run([sys.executable, SCRIPT, "--ms", "0.05", "--loops", "5", "--processes", "1",
                          "--imports", "json,decimal", "--rounds", "2"], capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    tail = out.stdout.split("\nimports: ", 1)[1]
    cpus = sorted(os.sched_getaffinity(0))
    started = re.findall(r"^  (\w+) on CPU (\d+) \(round (\d)\): import [\d.]+ s, (\d+) thread", tail, re.M)
    assert [(m, r) for m, _, r, _ in started] == [(m, str(r)) for r in (1, 2) for m in ("nothing", "json", "decimal")
                                                   for _ in range(2)]
    assert all(int(c) in cpus and int(t) >= 1 for _, c, _, t in started)
    loops, picklings = tail.split(" pickling (wall time):")
    for part, count in ((loops, 5), (picklings, 50)):
        series = re.findall(r"^  (\w+ on CPU \d+ \(round \d\))\s+p10\s+\d+ p50\s+\d+ p90\s+\d+ us; slow\s+(\d+)/(\d+)",
                            part, re.M)
        assert len(series) == 12 and all(int(total) == count for _, _, total in series), part
    missing = subprocess.run([sys.executable, SCRIPT, "--imports", "json,no_such_module_here"],
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode != 0 and "no module named no_such_module_here" in missing.stderr
    assert "processes:" not in missing.stdout  # refused before any setting ran


def test_the_pickled_request_is_the_showdowns():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    code = ("import sys; sys.path[:0] = sys.argv[1:3]; import bench_speed_episodes as b, showdown as s; "
            "assert all(b.step_request(k) == s.scheduler_output(k) for k in (0, 1, 7, 1000))")
    out = subprocess.run([sys.executable, "-c", code, os.path.join(root, "bench", "python"),
                          os.path.join(root, "bench", "showdown")], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    # The child of the imports setting imports no ringcast through the request builder.
    plain = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
                            "import bench_speed_episodes; print('ringcast' in sys.modules)",
                            os.path.join(root, "bench", "python")], capture_output=True, text=True, timeout=60)
    assert plain.returncode == 0 and plain.stdout.strip() == "False", plain.stdout + plain.stderr
