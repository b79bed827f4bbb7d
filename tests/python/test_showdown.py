"""The main job's showdown (tools/demo step 1) runs end to end on a tiny budget: every variant and mode,
the table, the targets, JSON with every number, the plot. Not a benchmark: nothing here is timed."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def showdown_module():
    sys.path.insert(0, os.path.join(ROOT, "bench", "showdown"))
    try:
        import showdown
    finally:
        sys.path.pop(0)
    return showdown


PICKLING_PARTS = ("request_pickle", "request_unpickle", "reply_pickle", "replies_unpickle")


@pytest.mark.parametrize("trace", [False, True], ids=["plain", "trace"])
def test_showdown_runs_every_variant_and_writes_its_report(tmp_path, trace):
    out = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "showdown", "showdown.py"), "--steps", "20",
                          "--repeats", "2", "--work-ms", "0.2", "--prep-ms", "0.4", "--idle-seconds", "0.05",
                          "--out", str(tmp_path)] + (["--trace", "--dump-steps"] if trace else []),
                         capture_output=True, text=True, timeout=300, env=dict(os.environ))
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "executor showdown — 2 workers" in out.stdout
    assert "python floor" in out.stdout and "; this run, medians" in out.stdout
    assert "ringcast idle worker CPU" in out.stdout and "ringcast idle executor CPU" in out.stdout
    assert "where a sync step's time goes" in out.stdout
    assert "when each worker had the request in an all-rank sync step" in out.stdout
    report = json.loads((tmp_path / "showdown.json").read_text())
    rows = report["rows"]
    assert report["settle_others"] is False
    assert len(rows) == 4 * 2 * 2  # variants a-d x single/all x sync/async
    assert {(r["kind"], r["replies"], r["mode"]) for r in rows} == {
        (k, rep, m) for k in "abcd" for rep in ("single", "all") for m in ("sync", "async")}
    for r in rows:
        assert len(r["runs"]) == 2 and len(r["overhead_p50_us_runs"]) == 2
        assert r["p50_us"] > 0 and r["p99_us"] >= r["p50_us"]
        assert len(r["worker_cpu_pct"]) == 2 and len(r["worker_idle_cpu_pct"]) == 2
        assert 0 <= r["executor_idle_cpu_pct"] < 100
        b = r["breakdown_p50_us"]
        measured = {"enqueue", "first_worker_has_it", "last_worker_has_it", "work", "reply_to_collected",
                    "last_reply_after_prep", "collected_after_both", "overhead", "request_pickle",
                    "request_unpickle", "replies_unpickle", "work_stalled", "prep_stalled"}
        # when each replying worker had the request: by rank, and the k-th to have it
        ranks = range(2) if r["replies"] == "all" else range(1)
        arrival = {f"has_it_rank{i}" for i in ranks} | {f"has_it_{k}" for k in range(1, len(ranks) + 1)}
        assert sorted(b[f"has_it_{k}"] for k in range(1, len(ranks) + 1)) == [b[f"has_it_{k}"] for k in range(1, len(ranks) + 1)]
        assert b["has_it_1"] == b["first_worker_has_it"]
        measured |= arrival
        if r["mode"] == "async":  # the split is of the sync step: async pickling overlaps the preparation
            assert set(b) == measured
        else:
            assert set(b) == measured | {"reply_pickle", "pickling", "overhead_but_pickling", "enqueue_but_pickling",
                                         "worker_has_it_but_unpickling", "collected_but_pickling"}
            if trace:  # every variant pickles the request and the replies inside its own calls: all were timed
                assert all(b[k] > 0 for k in PICKLING_PARTS), b
                assert b["enqueue_but_pickling"] < b["enqueue"] and b["overhead_but_pickling"] < b["overhead"]
            else:  # untraced, nothing is timed: the parts are whole
                assert all(b[k] == 0 for k in PICKLING_PARTS), b
                assert b["enqueue_but_pickling"] == b["enqueue"]
        # the collect returns after the last reply was sent and after the preparation: never negative
        assert b["collected_after_both"] >= 0
        # (a worker may have the request before the enqueue call returns: those parts may be negative)
        assert b["work"] > 0 and b["enqueue"] > 0
        # a stall is wall time less the thread's CPU time of the same code: never below ~0 (clock
        # granularity), never above the part it is of; a sync step has no preparation to stall
        assert -20 < b["work_stalled"] < b["work"]
        assert (b["prep_stalled"] == 0) == (r["mode"] == "sync") and b["prep_stalled"] > -20
        assert 0 <= r["cpu_lost_share"] <= 1 and "cpu_kept_steps_overhead_us" not in r
        assert all(0 <= run["cpu_lost_share"] <= 1 and "cpu_lost_steps" not in run for run in r["runs"])
        # kernel sleeps per step: counted for ringcast's waits (>= 0), not for the spinning baseline
        if r["kind"] == "a":
            assert r["worker_sleeps_per_step"] is None and r["executor_sleeps_per_step"] is None
        else:
            assert r["worker_sleeps_per_step"] >= 0 and r["executor_sleeps_per_step"] >= 0
    assert "CPU pinning: " in out.stdout and "sleeps/step" in out.stdout
    assert "where an async step's tail goes" in out.stdout and "what the critical path lost" in out.stdout
    # The full-speed view (VM speed episodes): a share and, with enough such steps, their overhead; per run
    # and per configuration; the per-step lists stay out of the JSON.
    pinned = "CPU pinning: executor on" in out.stdout
    assert report["full_speed_view"] == pinned
    if pinned:
        assert "the same on the steps whose executor ran at full speed" in out.stdout
    else:
        assert "(the same on the steps that ran at full speed: only with every process on a CPU of its own" in out.stdout
        assert "the same on the steps whose critical path kept its CPUs" in out.stdout
    for r in rows:
        assert 0 <= r["full_speed_share"] <= 1 and "_speed" not in r
        enough = r["full_speed_share"] * sum(run["steps"] for run in r["runs"]) >= 10
        assert (r["full_speed_overhead_p50_us"] is not None) == enough
        for run in r["runs"]:
            assert 0 <= run["full_speed_share"] <= 1 and "_speed" not in run
            assert "full_speed_steps_overhead_us" not in run
    assert ("the same sync step with its pickling taken out" in out.stdout) == trace
    # Traced, each sync target line also says what its bound leaves ringcast's transport (the arithmetic:
    # test_the_targets_say_in_us_what_they_leave_the_transport), from the rows written to showdown.json.
    assert out.stdout.count("x (a) leaves (c)'s transport") == (2 if trace else 0)
    if trace:
        sync = {r["replies"]: (r, next(b for b in rows if b["kind"] == "a" and b["replies"] == r["replies"]
                                       and b["mode"] == "sync")) for r in rows if r["kind"] == "c" and r["mode"] == "sync"}
        for replies, (ours, base) in sync.items():
            bound = 1.0 if "shared by" in out.stdout else 0.8
            assert "    " + showdown_module().transport_allowance(bound, base, ours) in out.stdout
    # The parts again on the full-speed steps alone, pooled: whenever 10 or more steps ran so; the per-step
    # list itself stays out of showdown.json and goes to steps.json.gz when asked for.
    for r in rows:
        fast = r["full_speed_breakdown_p50_us"]
        assert (fast is not None) == (r["full_speed_overhead_p50_us"] is not None)
        if fast is not None:
            assert set(fast) == set(r["breakdown_p50_us"]) | {"executor_probe_us", "critical_work_cpu_us", "prep_cpu_us"}
            assert fast["overhead"] == r["full_speed_overhead_p50_us"]
        assert all("_steps" not in run and "_parts" not in run for run in r["runs"])
    assert ("the same on the steps whose executor ran at full speed (p50 us, pooled" in out.stdout) == (trace and pinned)
    if trace:
        import gzip
        with gzip.open(tmp_path / "steps.json.gz", "rt") as f:
            dumped = json.load(f)
        assert {(d["kind"], d["replies"], d["mode"], d["run"]) for d in dumped["runs"]} == {
            (r["kind"], r["replies"], r["mode"], i) for r in rows for i in (1, 2)}
        for d in dumped["runs"]:
            row = next(r for r in rows if (r["kind"], r["replies"], r["mode"]) == (d["kind"], d["replies"], d["mode"]))
            run = row["runs"][d["run"] - 1]
            columns = d["steps"]  # one list per part, the run's steps in order
            assert {len(v) for v in columns.values()} == {run["steps"]}
            assert sum(columns["full_speed"]) == round(run["full_speed_share"] * run["steps"])
            overheads = sorted(columns["overhead"])  # the run's p50 is the middle one, as measure() takes it (10 ns)
            assert overheads[len(overheads) // 2] == pytest.approx(run["overhead_p50_us"], abs=0.006)
    else:
        assert not (tmp_path / "steps.json.gz").exists()
    assert report["pinning"]
    assert set(report["python_floor_us"]) == {"sync single", "sync all", "async single", "async all"}
    assert all(v > 0 for v in report["python_floor_us"].values())
    try:
        import matplotlib  # noqa: F401
    except ImportError:  # shown in the summary (tools/test installs python3-matplotlib)
        pytest.skip("matplotlib absent: everything but the plot was checked")
    assert (tmp_path / "showdown.png").stat().st_size > 1000
    from PIL import Image  # matplotlib's own dependency
    with Image.open(tmp_path / "showdown.png") as im:
        assert im.mode == "P" and im.size[0] > 1000  # a palette PNG of the whole figure


def test_full_speed_steps_are_those_whose_executor_ran_near_its_fastest_tenth():
    """classify_full_speed: a step counts only when the executor's probe and (async) its preparation each
    took within 1.3x of their 10th percentile over every run; the slow ones (1.7x, the VM's episodes) are
    left out, and so is a run's figure when under 10 steps remain. The critical worker's work is counted
    apart, not selected on."""
    showdown = showdown_module()
    n = 40
    fast, slow = 10e-6, 17e-6
    def run(executor, worker, prep, overhead):
        # each step's parts as measure() keeps them (one here, "enqueue", equal to the overhead / 10)
        parts = [{"enqueue": o / 10, "overhead": o} for o in overhead]
        return {"steps": n, "_parts": parts, "_speed": {"executor": executor, "worker": worker, "prep": prep}}
    # run 1: the executor slow in its second half; run 2: the critical worker slow in one step of four
    # (kept); run 3 (async): the preparation slow in every other step; run 4: slow throughout.
    runs = [run([fast] * 20 + [slow] * 20, [1e-3] * n, [0.0] * n, [10.0] * 20 + [99.0] * 20),
            run([fast] * n, [1.7e-3 if i % 4 == 0 else 1e-3 for i in range(n)], [0.0] * n, [20.0] * n),
            run([fast] * n, [1e-3] * n, [3.4e-3 if i % 2 else 2e-3 for i in range(n)],
                [99.0 if i % 2 else 30.0 for i in range(n)]),
            run([slow] * n, [1e-3] * n, [0.0] * n, [99.0] * n)]
    refs = showdown.classify_full_speed(runs)
    assert refs == {"executor": fast, "worker": 1e-3, "prep": 2e-3}
    assert [r["full_speed_share"] for r in runs] == [0.5, 1.0, 0.5, 0.0]
    assert [r["full_speed_overhead_p50_us"] for r in runs] == [10.0, 20.0, 30.0, None]
    assert [r["worker_full_speed_share"] for r in runs] == [1.0, 0.75, 1.0, 1.0]
    assert all("_speed" not in r and "_parts" not in r for r in runs)
    # every step kept, in order, with its class and what decided it (us): --dump-steps writes these
    first = runs[0]["_steps"]
    assert [t["full_speed"] for t in first] == [True] * 20 + [False] * 20
    assert [t["overhead"] for t in first] == [10.0] * 20 + [99.0] * 20
    assert first[0]["executor_probe_us"] == pytest.approx(10.0) and first[-1]["executor_probe_us"] == pytest.approx(17.0)
    assert first[0]["critical_work_cpu_us"] == pytest.approx(1000.0) and runs[2]["_steps"][1]["prep_cpu_us"] == pytest.approx(3400.0)
    row = showdown.summarize([dict(r, **{k: 1.0 for k in showdown.SCALARS}, variant="v", kind="c", replies="all",
                                       mode="sync", worker_cpu_pct=[1.0], worker_idle_cpu_pct=[0.0],
                                       executor_idle_cpu_pct=0.0, breakdown_p50_us={}, executor_sleeps_per_step=None,
                                       worker_sleeps_per_step=[None]) for r in runs[:2]])
    assert row["full_speed_share"] == 60 / 80 and row["full_speed_overhead_p50_us"] == 20.0  # 20 x 10, 40 x 20
    # Each part on the full-speed steps alone, pooled: runs 1 and 4 hold 20 such steps (of 80, whose
    # median over all would be the slow ones' 99 / 9.9); run 4 alone holds none: nothing stated.
    def row_of(*rs):
        return showdown.summarize([dict(r, **{k: 1.0 for k in showdown.SCALARS}, variant="v", kind="c", replies="all",
                                        mode="sync", worker_cpu_pct=[1.0], worker_idle_cpu_pct=[0.0],
                                        executor_idle_cpu_pct=0.0, breakdown_p50_us={}, executor_sleeps_per_step=None,
                                        worker_sleeps_per_step=[None]) for r in rs])
    fast = row_of(runs[0], runs[3])["full_speed_breakdown_p50_us"]
    assert fast["overhead"] == 10.0 and fast["enqueue"] == 1.0 and fast["executor_probe_us"] == pytest.approx(10.0)
    assert "full_speed" not in fast
    assert row_of(runs[3])["full_speed_breakdown_p50_us"] is None


def test_a_step_lost_a_cpu_when_its_critical_path_stalled_or_waited():
    """cpu_lost: a step lost a CPU on its critical path when the preparation stalled more than
    CPU_LOST_US or the enqueue went on more than SLOW_PART_US after a worker had the request (not an
    enqueue that waited for ring space before publishing), or — only if the critical reply came after
    the preparation ended — the critical worker's work stalled so or its hand-over took that long (none
    at its bound); the others' overheads are kept for the configuration's pooled p50 (summarize), which
    needs 10."""
    showdown = showdown_module()
    at, slow = showdown.CPU_LOST_US, showdown.SLOW_PART_US
    def step(o, work=0.0, prep=0.0, enqueue=20.0, first=10.0, has_it=30.0, after_prep=5.0):
        return {"work_stalled": work, "prep_stalled": prep, "enqueue": enqueue, "first_worker_has_it": first,
                "last_worker_has_it": has_it, "last_reply_after_prep": after_prep, "overhead": o}
    parts = [step(10.0), step(11.0, work=at, prep=at, first=-slow, has_it=slow),
             step(900.0, work=at + 1), step(1000.0, prep=at + 1, has_it=-5.0), step(12.0, work=-2.0),
             step(1100.0, has_it=1500.0), step(990.0, enqueue=950.0, first=-920.0, has_it=-900.0),
             step(13.0, work=800.0, has_it=1200.0, after_prep=-300.0),  # replied before the prep ended
             step(14.0, enqueue=450.0, first=12.0, has_it=14.0)]  # waited for ring space, then published
    got = showdown.cpu_lost(parts)
    assert got == {"cpu_lost_share": 4 / 9, "cpu_kept_steps_overhead_us": [10.0, 11.0, 12.0, 13.0, 14.0],
                   "cpu_lost_steps": [[at + 1, 900.0], [at + 1, 1000.0], [1500.0, 1100.0], [920.0, 990.0]]}
    parts = parts[:5]
    base = dict(variant="v", kind="c", replies="all", mode="async", worker_cpu_pct=[1.0], worker_idle_cpu_pct=[0.0],
                executor_idle_cpu_pct=0.0, breakdown_p50_us={}, executor_sleeps_per_step=None,
                worker_sleeps_per_step=[None], **{k: 1.0 for k in showdown.SCALARS})
    runs = [dict(base, steps=5, **showdown.cpu_lost(parts)) for _ in range(4)]  # 12 kept of 20
    row = showdown.summarize(runs)  # 12 kept, 8 lost: too few of those to state
    assert row["cpu_lost_share"] == 8 / 20 and row["cpu_kept_overhead_p50_us"] == 11.0
    assert row["cpu_lost_overhead_p50_us"] is None and row["cpu_lost_stall_p50_us"] is None
    assert all("cpu_kept_steps_overhead_us" not in r and "cpu_lost_steps" not in r for r in row["runs"])
    more = showdown.summarize([dict(base, steps=5, **showdown.cpu_lost(parts)) for _ in range(5)])  # 15 / 10
    assert more["cpu_lost_overhead_p50_us"] == 950.0 and more["cpu_lost_stall_p50_us"] == at + 1
    few = showdown.summarize([dict(base, steps=5, **showdown.cpu_lost(parts)) for _ in range(3)])  # 9 kept
    assert few["cpu_kept_overhead_p50_us"] is None


def test_the_work_is_calibrated_on_every_cpu_and_at_the_fastest():
    """Compute calibrates on each CPU it may use (a slow episode on one must not set the speed) and puts
    its affinity back."""
    showdown = showdown_module()
    home = os.sched_getaffinity(0)
    seen = []
    # A stand-in clock: the loop takes 2 ms (a slow episode) but once, in the third try on the last CPU,
    # 1 ms: the calibration must take the fastest of all, not the first, the last or a mean.
    clock = [0.0]
    last = max(home)
    def fake_spin(n):
        cpu = next(iter(os.sched_getaffinity(0)))
        seen.append(cpu)
        clock[0] += 1e-3 if cpu == last and seen.count(cpu) == 3 else 2e-3
    real_spin, real_thread_time = showdown.Compute._spin, showdown.time.thread_time
    try:
        showdown.Compute._spin = staticmethod(fake_spin)
        showdown.time.thread_time = lambda: clock[0]
        compute = showdown.Compute(0.001)
    finally:
        showdown.Compute._spin = staticmethod(real_spin)
        showdown.time.thread_time = real_thread_time
    assert os.sched_getaffinity(0) == home
    assert seen == [c for c in sorted(home) for _ in range(5)]
    # 1 ms at the fastest try's 20000 iterations per ms (within one: the stand-in clock's float sums round);
    # the first try, the last or a mean would give 10000-11111
    assert abs(compute.iters - 20000) <= 1, compute.iters


def test_pin_shared_puts_the_executor_alone_and_the_workers_in_turn_on_the_rest(monkeypatch):
    """--pin shared, for fewer CPUs than processes: the executor on the first CPU alone, the workers
    round-robin over the others; 'auto' leaves such a machine unpinned."""
    showdown = showdown_module()
    monkeypatch.setattr(showdown.os, "sched_getaffinity", lambda pid: {4, 5})
    plan, text = showdown.plan_pinning("shared", 2)
    assert plan == {"executor": {4}, "workers": [5, 5], "shared": True}, text
    monkeypatch.setattr(showdown.os, "sched_getaffinity", lambda pid: {0, 1, 2})
    plan, _ = showdown.plan_pinning("shared", 3)
    assert plan["executor"] == {0} and plan["workers"] == [1, 2, 1]
    assert showdown.plan_pinning("auto", 3)[0] is None  # 3 CPUs < 5
    monkeypatch.setattr(showdown.os, "sched_getaffinity", lambda pid: {0})
    assert showdown.plan_pinning("shared", 2)[0] is None


def test_the_targets_are_those_of_the_machines_setting():
    """With a CPU for every thread of a step (the executor's two, one per worker) the 16-core targets
    (sync 0.8, async 0.33, all / single 1.10); where they share CPUs (the 2-core machine's executor + 2
    workers, or 16 workers on 16 CPUs) the shared setting's (sync 1.0, async 0.5, no aggregation target)."""
    showdown = showdown_module()
    own = {"sync": 0.8, "async": 0.33, "all_single": 1.10}
    shared = {"sync": 1.0, "async": 0.5, "all_single": None}
    for cpus, workers, want in ((16, 2, own), (16, 8, own), (16, 14, own), (16, 15, shared), (16, 16, shared),
                                (2, 2, shared), (3, 2, shared), (4, 2, own)):
        got = showdown.targets_for(cpus, workers)
        assert {k: got[k] for k in want} == want, (cpus, workers, got)
        assert ("shared" in got["setting"]) == (want is shared)


def test_the_targets_say_in_us_what_they_leave_the_transport():
    """The target lines' arithmetic, in µs: a (c) / (a) bound leaves ringcast's transport the bound times the
    spinner's overhead less ringcast's own pickling; all / single is the all-rank step's growth over the
    single-rank one against what the line allows, beside the Python floor's own growth."""
    showdown = showdown_module()
    base = {"overhead_p50_us": 92.5, "breakdown_p50_us": {"pickling": 47.8, "overhead_but_pickling": 43.5}}
    ours = {"overhead_p50_us": 74.5, "breakdown_p50_us": {"pickling": 46.0, "overhead_but_pickling": 27.0}}
    line = showdown.transport_allowance(0.8, base, ours)
    assert line == ("with (c)'s pickling (46.0 us; (a)'s 47.8), 0.8 x (a) leaves (c)'s transport 28.0 us; it took "
                    "27.0 (0.62x (a)'s 43.5; medians of parts)"), line
    line = showdown.aggregation_allowance(1.10, {"overhead_p50_us": 19.8}, {"overhead_p50_us": 21.9}, 5.5, 6.9)
    assert line == "all-rank +2.1 us over single-rank, where the line allows +2.0; the Python floor alone +1.4 (1.25x)", line


def test_the_all_single_line_is_also_matched_on_the_critical_workers_speed():
    """With every process pinned the sync all / single line also gives all_single.py's speed-matched ratio
    (its arithmetic: test_bench_all_single.py), from the steps in hand, not from a dump."""
    showdown = showdown_module()

    def run(replies, groups, kind="c"):
        steps = [{"overhead": o, "critical_work_cpu_us": w, "last_worker_has_it": 14.0}
                 for n, w, o in groups for _ in range(n)]
        return {"variant": f"({kind})", "kind": kind, "replies": replies, "mode": "sync", "run": 1, "steps": steps}

    single = run("single", [(40, 1000.0, 30.0), (20, 1700.0, 50.0)])
    every = run("all", [(10, 1000.0, 32.0), (60, 1700.0, 52.0), (30, 2000.0, 99.0)])
    other = run("all", [(100, 1000.0, 1.0)], kind="a")  # another variant's steps: not read
    line = showdown.speed_matched_line([single, every, other], 1000.0)
    assert line == ("matched on the critical worker's speed (bench/showdown/all_single.py): 52.0 / 50.0 us = 1.04 "
                    "(coverage 70% of the all-rank steps; the critical worker at full speed in 67% of single-rank "
                    "and 10% of all-rank steps)"), line
    assert showdown.speed_matched_line([single, other], 1000.0) is None  # no all-rank steps of (c)
    assert showdown.speed_matched_line([run("single", [(5, 1000.0, 30.0)]), every], 1000.0) is None  # no class of 20
    # The showdown's reference decides what full speed is: at 600 us every step is 1.67x or slower.
    assert "at full speed in 0% of single-rank and 0% of all-rank steps" in showdown.speed_matched_line([single, every], 600.0)


def test_settle_others_drains_every_rank_and_says_so(tmp_path):
    """--settle-others: in single-rank sync steps every worker replies and the executor collects the
    other ranks' replies after each step. Without that drain of every other rank (3 workers: ranks 1 and
    2) the spinner's reply queues (10 messages) would fill in the 30 steps and its workers would block:
    the run would not end. The step dump says it was settled."""
    out = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "showdown", "showdown.py"), "--steps", "20",
                          "--repeats", "1", "--variants", "ac", "--work-ms", "0.2", "--prep-ms", "0.4", "--workers", "3",
                          "--idle-seconds", "0.05", "--settle-others", "--dump-steps", "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=120, env=dict(os.environ))
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "--settle-others: in single-rank sync steps every worker replied" in out.stdout
    report = json.loads((tmp_path / "showdown.json").read_text())
    assert report["settle_others"] is True and len(report["rows"]) == 2 * 2 * 2
    import gzip
    with gzip.open(tmp_path / "steps.json.gz", "rt") as f:
        assert json.load(f)["settle_others"] is True
