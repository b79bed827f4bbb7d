"""bench/python/bench_step_split.py end to end: it runs, splits every step into all its parts, and the
parts are in causal order (each part starts where the previous one ended, across the two processes),
so none is negative. Asserts structure and order, never a duration."""
import os
import re
import subprocess
import sys

import pytest

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                      "bench", "python", "bench_step_split.py")
PARTS = ["enqueue: Python -> module", "enqueue: pickle", "enqueue: copy + publish",
         "enqueue: module -> Python (off the critical path)", "hand-over: publish -> worker sees it",
         "dequeue: copy + release", "dequeue: unpickle", "dequeue: module -> Python", "reply: Python -> module",
         "reply: pickle", "reply: copy + publish", "hand-back: publish -> collect has it",
         "collect: copy + unpickle", "collect: module -> Python",
         "after the last reply: publish -> collect returned", "overhead (step - work)",
         "sum of the critical path (medians)"]


@pytest.mark.parametrize("workers", [1, 3])
def test_the_step_split_names_every_part_and_no_part_runs_backwards(workers):
    out = subprocess.run([sys.executable, SCRIPT, "--steps", "60", "--runs", "2", "--work-us", "50",
                          "--workers", str(workers)],
                         capture_output=True, text=True, timeout=120, env=dict(os.environ))
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    rows = {}
    for line in out.stdout.splitlines()[1:]:
        m = re.match(r"^  (.+?)\s{2,}(-?[\d.]+)\s+(-?[\d.]+)$", line)
        assert m, line
        rows[m[1]] = (float(m[2]), float(m[3]))
    assert list(rows) == PARTS
    assert all(v >= 0 for values in rows.values() for v in values), rows
