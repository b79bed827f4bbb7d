"""examples/executor.py runs end to end: collective_rpc with all ranks, one output rank, aggregation."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_executor_example_runs():
    out = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "executor.py")], capture_output=True,
                         text=True, timeout=120, env=dict(os.environ))
    assert out.returncode == 0, out.stderr
    lines = dict(line.split(" -> ", 1) for line in out.stdout.strip().splitlines())
    assert lines["add      "] == "[3, 3, 3, 3]"
    assert "'rank': 0" in lines["whoami[0]"]
    assert lines["kv_state "].count("block-") == 12
