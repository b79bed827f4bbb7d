"""bench/python/bench_wake_ahead.py end to end: it runs both settings in every round, alternated, and
every worker got every message (a latency per round for each). Asserts structure, never a duration."""
import os
import re
import subprocess
import sys

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                      "bench", "python", "bench_wake_ahead.py")


def test_the_wake_ahead_bench_alternates_both_settings_and_reports_every_round():
    out = subprocess.run([sys.executable, SCRIPT, "--workers", "2", "--gap-ms", "0.5", "--jitter", "--messages", "40",
                          "--rounds", "2"], capture_output=True, text=True, timeout=120, env=dict(os.environ))
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    rounds = re.findall(r"^  round (\d) wake_ahead=(True|False)\s+([\d.]+) /\s+([\d.]+)\s+sleeps/message ([\d.]+)$",
                        out.stdout, re.M)
    assert [(r, s) for r, s, *_ in rounds] == [("1", "False"), ("1", "True"), ("2", "True"), ("2", "False")], out.stdout
    assert "median of the rounds' p50: off" in out.stdout
