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
