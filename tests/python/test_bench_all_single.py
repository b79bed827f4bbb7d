"""bench/showdown/all_single.py on made-up step dumps whose answers are known: each part's p50 in the
single- and all-rank sync cells and its growth, the critical worker against its step's median rank,
the two cells matched on the critical worker's speed, printed and written alike; async rows and other variants kept apart; bad input refused by name.
Never a speed."""
import gzip
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "bench", "showdown", "all_single.py")


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, timeout=120)


def entry(kind, replies, steps, mode="sync", run_no=1):
    return {"variant": f"({kind}) made up", "kind": kind, "replies": replies, "mode": mode, "run": run_no, "steps": steps}


def write_dump(path, runs):
    with gzip.open(path, "wt") as f:
        json.dump({"speed_refs_us": {}, "runs": runs}, f)


def cell(n, overhead, enqueue, critical, rank0, collected, ranks=None):
    steps = {"overhead": [overhead] * n, "enqueue": [enqueue] * n, "last_worker_has_it": [critical] * n,
             "reply_to_collected": [collected] * n, "has_it_rank0": [rank0] * n}
    for k, v in (ranks or {}).items():
        steps[f"has_it_rank{k}"] = [v] * n
    return steps


def test_each_part_and_its_growth(tmp_path):
    # 4 ranks at 10, 12, 20, 30 us in every all-rank step: their median 16; the critical worker (the last
    # reply) is the one at 20, +4 after it. Two runs of the all-rank cell pool into one p50.
    every = cell(5, overhead=60.0, enqueue=15.0, critical=20.0, rank0=10.0, collected=7.0, ranks={1: 12.0, 2: 20.0, 3: 30.0})
    every2 = dict(every, overhead=[70.0] * 5)
    single = cell(6, overhead=50.0, enqueue=12.0, critical=9.0, rank0=9.0, collected=8.0)
    write_dump(tmp_path / "steps.json.gz", [
        entry("c", "single", single), entry("c", "all", every), entry("c", "all", every2, run_no=2),
        entry("c", "all", cell(3, 999.0, 999.0, 999.0, 999.0, 999.0), mode="async"),  # not a sync step: not read
        entry("a", "single", single)])  # a variant without all-rank sync steps: left out
    done = run(str(tmp_path / "steps.json.gz"), "--json", str(tmp_path / "out.json"))
    assert done.returncode == 0, done.stderr[-2000:]
    (c,) = json.loads((tmp_path / "out.json").read_text())
    assert c["kind"] == "c" and c["workers"] == 4
    assert (c["overhead_single_p50_us"], c["overhead_all_p50_us"]) == (50.0, 65.0)
    assert (c["enqueue_single_p50_us"], c["enqueue_all_p50_us"]) == (12.0, 15.0)
    assert (c["last_worker_has_it_single_p50_us"], c["last_worker_has_it_all_p50_us"]) == (9.0, 20.0)
    assert (c["has_it_rank0_single_p50_us"], c["has_it_rank0_all_p50_us"]) == (9.0, 10.0)
    assert (c["reply_to_collected_single_p50_us"], c["reply_to_collected_all_p50_us"]) == (8.0, 7.0)
    assert c["critical_after_median_rank_p50_us"] == 4.0
    line = [x for x in done.stdout.splitlines() if x.startswith("(c) made up") and " W=" in x]
    assert len(line) == 1 and "(a) made up" not in done.stdout, done.stdout
    assert line[0].endswith(
        "W=4: overhead 50.0 -> 65.0 (+15.0), the line allows +5.0; enqueue 12.0 -> 15.0 (+3.0); the critical "
        "worker had it 9.0 -> 20.0 (+11.0) (rank 0 9.0 -> 10.0 (+1.0); the critical one after its step's median "
        "rank +4.0); reply -> collected 8.0 -> 7.0 (-1.0)"), line[0]


def test_the_critical_worker_is_set_against_its_own_steps_median_rank(tmp_path):
    # 30 steps with the ranks at 10, 20, 30 and the critical (last reply) one at 30: +10 after its step's
    # median rank; 10 steps with the ranks at 40, 50, 60 and the critical one at 40: -10. Per step the p50
    # of the differences is +10; the pooled medians (critical 30, every rank 25) would say +5.
    n_fast, n_slow = 30, 10
    every = {"has_it_rank0": [10.0] * n_fast + [40.0] * n_slow, "has_it_rank1": [20.0] * n_fast + [50.0] * n_slow,
             "has_it_rank2": [30.0] * n_fast + [60.0] * n_slow, "last_worker_has_it": [30.0] * n_fast + [40.0] * n_slow}
    for k in ("overhead", "enqueue", "reply_to_collected"):
        every[k] = [1.0] * (n_fast + n_slow)
    write_dump(tmp_path / "steps.json.gz", [entry("c", "single", cell(3, 1.0, 1.0, 1.0, 1.0, 1.0)), entry("c", "all", every)])
    done = run(str(tmp_path / "steps.json.gz"), "--json", str(tmp_path / "out.json"))
    assert done.returncode == 0, done.stderr[-2000:]
    (c,) = json.loads((tmp_path / "out.json").read_text())
    assert c["workers"] == 3 and c["critical_after_median_rank_p50_us"] == 10.0
    assert "--settle-others" not in done.stdout


def speed_steps(groups):
    """(count, critical worker's work us, overhead us, its hand-over us) groups -> a step-dump run's columns."""
    steps = {k: [] for k in ("overhead", "enqueue", "last_worker_has_it", "reply_to_collected", "has_it_rank0",
                             "has_it_rank1", "critical_work_cpu_us")}
    for n, work, overhead, has_it in groups:
        for k, v in (("critical_work_cpu_us", work), ("overhead", overhead), ("last_worker_has_it", has_it),
                     ("has_it_rank0", has_it), ("has_it_rank1", has_it), ("enqueue", 10.0), ("reply_to_collected", 5.0)):
            steps[k] += [v] * n
    return steps


def test_the_cells_matched_on_the_critical_workers_speed(tmp_path):
    # Single-rank: 40 steps at full speed (work 1000 us, overhead 30), 20 at 1.7x (overhead 50), 5 at 2.0x
    # (90: under 20 steps, a class left out). All-rank: 10 at full speed (32), 60 at 1.7x (52), 30 at 2.0x
    # (99). The fastest tenth of every work: 1000. As measured: 52 / 30. Weighted to the all-rank steps'
    # classes (full speed 0.1, 1.7x 0.6: coverage 0.7), the single-rank steps' median is 50, the covered
    # all-rank steps' 52: 1.04 — an unweighted median of the same single-rank steps would be 30.
    single = speed_steps([(40, 1000.0, 30.0, 13.0), (20, 1700.0, 50.0, 30.0), (5, 2000.0, 90.0, 40.0)])
    every = speed_steps([(10, 1000.0, 32.0, 14.0), (60, 1700.0, 52.0, 31.0), (30, 2000.0, 99.0, 45.0)])
    write_dump(tmp_path / "steps.json.gz", [entry("c", "single", single), entry("c", "all", every)])
    done = run(str(tmp_path / "steps.json.gz"), "--json", str(tmp_path / "out.json"))
    assert done.returncode == 0, done.stderr[-2000:]
    (c,) = json.loads((tmp_path / "out.json").read_text())
    m = c["speed_matched"]
    assert m["work_ref_us"] == 1000.0 and abs(m["coverage"] - 0.7) < 1e-9
    assert (m["overhead_single_reweighted_p50_us"], m["overhead_all_covered_p50_us"]) == (50.0, 52.0)
    full, mid, slow, slowest = m["classes"]
    assert (full["from"], full["to"], slowest["from"], slowest["to"]) == (0.0, 1.3, 1.9, None)
    assert (full["weighted"], mid["weighted"], slow["weighted"], slowest["weighted"]) == (True, False, True, False)
    assert (slow["overhead_single_p50_us"], slow["overhead_all_p50_us"], slow["has_it_single_p50_us"], slow["has_it_all_p50_us"]) == (50.0, 52.0, 30.0, 31.0)
    assert abs(slow["all_share"] - 0.6) < 1e-9 and abs(slowest["single_share"] - 5 / 65) < 1e-9
    assert mid["overhead_single_p50_us"] is None and mid["single_share"] == 0.0
    assert ("all / single 1.73 as measured; at the all-rank steps' speeds 52.0 / 50.0 = 1.04 "
            "(coverage 70% of the all-rank steps)") in done.stdout, done.stdout
    assert (slow["single_steps"], slow["all_steps"], slowest["single_steps"]) == (20, 60, 5)
    assert "x1.6-1.9 20/60 50.0/52.0 (30.0/31.0)" in done.stdout, done.stdout
    # The showdown's own full-speed reference, where the dump has it, decides the classes: at 700 us the
    # 1000-us steps are 1.43x (1.3-1.6), the 1700-us and 2000-us ones from 1.9 (the single-rank cell's 25
    # steps there: 20 at 50, 5 at 90; weighted 0.9 / (25/65) against 0.1 / (40/65)): 52 / 50 again, now
    # at a coverage of 100%.
    with gzip.open(tmp_path / "refd.json.gz", "wt") as f:
        json.dump({"speed_refs_us": {"worker": 700.0}, "runs": [entry("c", "single", single), entry("c", "all", every)]}, f)
    done = run(str(tmp_path / "refd.json.gz"), "--json", str(tmp_path / "refd.json"))
    assert done.returncode == 0, done.stderr[-2000:]
    m = json.loads((tmp_path / "refd.json").read_text())[0]["speed_matched"]
    assert m["work_ref_us"] == 700.0 and m["coverage"] == 1.0
    assert [k["single_steps"] for k in m["classes"]] == [0, 40, 0, 25] and [k["all_steps"] for k in m["classes"]] == [0, 10, 0, 90]
    assert (m["overhead_all_covered_p50_us"], m["overhead_single_reweighted_p50_us"]) == (52.0, 50.0)


def test_a_dump_without_the_critical_workers_work_time_gets_no_speed_view(tmp_path):
    write_dump(tmp_path / "steps.json.gz", [entry("c", "single", cell(2, 1.0, 1.0, 1.0, 1.0, 1.0)),
                                            entry("c", "all", cell(2, 1.0, 1.0, 1.0, 1.0, 1.0, ranks={1: 1.0}))])
    done = run(str(tmp_path / "steps.json.gz"), "--json", str(tmp_path / "out.json"))
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads((tmp_path / "out.json").read_text())[0]["speed_matched"] is None
    assert "no critical worker's work time in this dump (an older showdown)" in done.stdout
    # Where no class holds 20 single-rank steps, nothing is compared.
    write_dump(tmp_path / "few.json.gz", [entry("c", "single", speed_steps([(5, 1000.0, 30.0, 13.0)])),
                                          entry("c", "all", speed_steps([(5, 1000.0, 30.0, 13.0)]))])
    done = run(str(tmp_path / "few.json.gz"))
    assert done.returncode == 0 and "no class holds both cells' steps: not comparable" in done.stdout, done.stdout
    # A single-rank cell whose overhead is 0 (a made-up or broken dump) gets no ratio, not a traceback.
    write_dump(tmp_path / "zero.json.gz", [entry("c", "single", speed_steps([(30, 1000.0, 0.0, 13.0)])),
                                           entry("c", "all", speed_steps([(30, 1000.0, 30.0, 13.0)]))])
    done = run(str(tmp_path / "zero.json.gz"))
    assert done.returncode == 0 and "all / single - as measured" in done.stdout and "Traceback" not in done.stderr, done.stderr


def test_a_settled_dump_says_so(tmp_path):
    runs = [entry("c", "single", cell(2, 1.0, 1.0, 1.0, 1.0, 1.0)), entry("c", "all", cell(2, 1.0, 1.0, 1.0, 1.0, 1.0))]
    with gzip.open(tmp_path / "steps.json.gz", "wt") as f:
        json.dump({"speed_refs_us": {}, "runs": runs, "settle_others": True}, f)
    done = run(str(tmp_path / "steps.json.gz"))
    assert done.returncode == 0 and "(--settle-others: these single-rank steps started with every worker waiting" in done.stdout


def test_bad_input_is_refused_by_name(tmp_path):
    missing = run(str(tmp_path / "nope.json.gz"))
    assert missing.returncode != 0 and "cannot read" in missing.stderr and "nope.json.gz" in missing.stderr
    (tmp_path / "plain.json.gz").write_text("{}")  # not gzip
    assert "cannot read" in run(str(tmp_path / "plain.json.gz")).stderr
    with gzip.open(tmp_path / "summary.json.gz", "wt") as f:  # a showdown.json, not its step dump
        json.dump({"workers": 2, "rows": []}, f)
    done = run(str(tmp_path / "summary.json.gz"))
    assert done.returncode != 0 and "not a showdown step dump" in done.stderr, done.stderr
    write_dump(tmp_path / "only-single.json.gz", [entry("c", "single", cell(2, 1.0, 1.0, 1.0, 1.0, 1.0))])
    done = run(str(tmp_path / "only-single.json.gz"))
    assert done.returncode != 0 and "no variant with both single- and all-rank sync steps" in done.stderr
    no_column = cell(2, 1.0, 1.0, 1.0, 1.0, 1.0)
    del no_column["enqueue"]
    write_dump(tmp_path / "old.json.gz", [entry("c", "single", cell(2, 1.0, 1.0, 1.0, 1.0, 1.0)), entry("c", "all", no_column)])
    done = run(str(tmp_path / "old.json.gz"))
    assert done.returncode != 0 and "no 'enqueue' column" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    empty = {k: [] for k in cell(1, 1.0, 1.0, 1.0, 1.0, 1.0)}
    write_dump(tmp_path / "empty.json.gz", [entry("c", "single", cell(2, 1.0, 1.0, 1.0, 1.0, 1.0)), entry("c", "all", empty)])
    done = run(str(tmp_path / "empty.json.gz"))
    assert done.returncode != 0 and "the all-rank runs hold no steps" in done.stderr and "Traceback" not in done.stderr
    ragged = cell(3, 1.0, 1.0, 1.0, 1.0, 1.0, ranks={1: 2.0})
    ragged["has_it_rank1"] = ragged["has_it_rank1"][:2]
    write_dump(tmp_path / "ragged.json.gz", [entry("c", "single", cell(2, 1.0, 1.0, 1.0, 1.0, 1.0)), entry("c", "all", ragged)])
    done = run(str(tmp_path / "ragged.json.gz"))
    assert done.returncode != 0 and "not as long as its other columns" in done.stderr and "Traceback" not in done.stderr
    short_work = speed_steps([(3, 1000.0, 1.0, 1.0)])
    short_work["critical_work_cpu_us"] = short_work["critical_work_cpu_us"][:2]
    write_dump(tmp_path / "short-work.json.gz", [entry("c", "single", speed_steps([(3, 1000.0, 1.0, 1.0)])), entry("c", "all", short_work)])
    done = run(str(tmp_path / "short-work.json.gz"))
    assert done.returncode != 0 and "column is not as long as its overhead column" in done.stderr and "Traceback" not in done.stderr
    short_has_it = speed_steps([(3, 1000.0, 1.0, 1.0)])
    short_has_it["last_worker_has_it"] = short_has_it["last_worker_has_it"][:2]
    write_dump(tmp_path / "short-has-it.json.gz", [entry("c", "single", short_has_it), entry("c", "all", speed_steps([(3, 1000.0, 1.0, 1.0)]))])
    done = run(str(tmp_path / "short-has-it.json.gz"))
    assert done.returncode != 0 and "not as long" in done.stderr and "Traceback" not in done.stderr, done.stderr
