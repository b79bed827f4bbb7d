"""bench/showdown/slowest_of.py on made-up step dumps whose answers are known: each rank's times, the last
worker's, the max of W independent draws and the overhead growth, printed and written alike; bad input
refused. Never a speed."""
import gzip
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "bench", "showdown", "slowest_of.py")


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, timeout=120)


def run_entry(kind, replies, steps):
    return {"variant": f"({kind}) made up", "kind": kind, "replies": replies, "mode": "sync", "run": 1, "steps": steps}


def write_dump(path, runs):
    with gzip.open(path, "wt") as f:
        json.dump({"speed_refs_us": {}, "runs": runs}, f)


def test_fixed_ranks_give_the_exact_slowest_and_its_prediction(tmp_path):
    # 4 ranks, rank k always at 10 + 5k us: each rank's pooled p50 is the middle of 10, 15, 20, 25 (17.5),
    # the last worker always 25, and W independent draws (each rank has one value) exactly 25.
    n = 9
    every = {f"has_it_rank{k}": [10.0 + 5 * k] * n for k in range(4)}
    every["overhead"] = [44.0] * n
    single = {"has_it_rank0": [12.0] * n, "overhead": [40.0] * n}
    # A rank's missing time leaves its step out; an async row is not read.
    every["has_it_rank2"][0] = None
    write_dump(tmp_path / "steps.json.gz", [run_entry("c", "single", single), run_entry("c", "all", every),
                                            dict(run_entry("c", "all", {"has_it_rank0": [999.0]}), mode="async")])
    done = run(str(tmp_path / "steps.json.gz"), "--json", str(tmp_path / "out.json"), "--draws", "200")
    assert done.returncode == 0, done.stderr[-2000:]
    cells = json.loads((tmp_path / "out.json").read_text())
    assert len(cells) == 1
    c = cells[0]
    assert (c["workers"], c["all_rank_steps"], c["single_rank_steps"]) == (4, n - 1, n)
    assert c["single_worker_has_it_p50_us"] == 12.0 and c["each_rank_has_it_p50_us"] == 17.5
    assert c["last_worker_has_it_p50_us"] == 25.0 and c["last_predicted_p50_us"] == 25.0
    assert (c["overhead_single_p50_us"], c["overhead_all_p50_us"]) == (40.0, 44.0)
    line = [x for x in done.stdout.splitlines() if x.startswith("(c) made up")]
    assert len(line) == 1, done.stdout
    assert ("single 12.0, each rank 17.5 (together +5.5), last 25.0 (slowest of 4 +7.5; predicted 25.0); "
            "overhead 40.0 -> 44.0 (+4.0; the line allows +4.0)") in line[0], line[0]


def test_the_prediction_is_the_max_of_independent_draws(tmp_path):
    # 4 ranks, each at 10 or 20 us; within a step all ranks move together (the same value), so the last
    # worker's p50 is 10 or 20 as the steps have them — here 10 (two thirds of the steps) — while 4
    # independent draws give 10 only with probability 1/16: their max's p50 is 20.
    col = [10.0, 10.0, 20.0] * 40
    every = {f"has_it_rank{k}": list(col) for k in range(4)}
    every["overhead"] = [30.0] * len(col)
    single = {"has_it_rank0": [10.0] * 5, "overhead": [30.0] * 5}
    write_dump(tmp_path / "steps.json.gz", [run_entry("a", "single", single), run_entry("a", "all", every)])
    done = run(str(tmp_path / "steps.json.gz"), "--json", str(tmp_path / "out.json"), "--draws", "2001")
    assert done.returncode == 0, done.stderr[-2000:]
    (c,) = json.loads((tmp_path / "out.json").read_text())
    assert c["last_worker_has_it_p50_us"] == 10.0 and c["last_predicted_p50_us"] == 20.0


def test_bad_input_is_refused_by_name(tmp_path):
    missing = run(str(tmp_path / "nope.json.gz"))
    assert missing.returncode != 0 and "cannot read" in missing.stderr and "nope.json.gz" in missing.stderr
    (tmp_path / "plain.json.gz").write_text("{}")  # not gzip
    assert "cannot read" in run(str(tmp_path / "plain.json.gz")).stderr
    write_dump(tmp_path / "only-single.json.gz", [run_entry("c", "single", {"has_it_rank0": [1.0], "overhead": [2.0]})])
    done = run(str(tmp_path / "only-single.json.gz"))
    assert done.returncode != 0 and "no variant with both single- and all-rank sync steps" in done.stderr
    bad = run(str(tmp_path / "only-single.json.gz"), "--draws", "0")
    assert bad.returncode == 2 and "--draws must be at least 1" in bad.stderr
