"""bench/showdown/idle_floor.py on a tiny budget: one reading per sleep, as many as asked, printed and
written alike, with and without the executor's endpoints open; bad input refused. Never a speed."""
import ast
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "bench", "showdown", "idle_floor.py")


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, timeout=120)


def test_each_reading_is_printed_and_written(tmp_path):
    for queue, label in ((False, "plain"), (True, "ringcast")):
        out_json = tmp_path / f"{label}.json"
        done = run(*(["--queue"] if queue else []), "--readings", "3", "--seconds", "0.05", "--json", str(out_json))
        assert done.returncode == 0, done.stderr[-2000:]
        data = json.loads(out_json.read_text())
        assert data["queue"] is queue and data["torch"] is False and data["seconds"] == 0.05
        assert len(data["idle_cpu_pct"]) == 3 and all(v >= 0 for v in data["idle_cpu_pct"]), data
        line = [x for x in done.stdout.splitlines() if x.startswith(f"{label} idle CPU % per second: ")]
        assert len(line) == 1, done.stdout
        assert ast.literal_eval(line[0].split(": ", 1)[1]) == data["idle_cpu_pct"]
        assert done.stdout.startswith(f"{label} threads "), done.stdout


def test_bad_input_is_refused():
    for args in (("--readings", "0"), ("--seconds", "0")):
        done = run(*args)
        assert done.returncode == 2 and "must be positive" in done.stderr, (args, done.stderr)
