"""bench/python/bench_collect_width.py end to end on a tiny budget: it collects from every rank and from
one, in every round, and the worker process ends with it. Asserts structure, never a duration."""
import os
import re
import subprocess
import sys

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                      "bench", "python", "bench_collect_width.py")


def test_the_collect_width_bench_reports_every_round():
    out = subprocess.run([sys.executable, SCRIPT, "--workers", "3", "--n", "20", "--rounds", "2"],
                         capture_output=True, text=True, timeout=120, env=dict(os.environ))
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    rows = re.findall(r"^\s+(\d)\s+[\d.]+\s+[\d.]+\s+-?[\d.]+\s+[\d.]+\s+-?[\d.]+$", out.stdout, re.M)
    assert rows == ["1", "2"], out.stdout
    assert "W=3" in out.stdout
