#!/usr/bin/env python3
"""Where an all-rank sync step's extra time goes, part by part, from a showdown's step dump.

The all / single <= 1.10 target asks an all-rank sync step's overhead to be within a tenth of the
single-rank one's. This reads the step dump of a showdown (``showdown.py --dump-steps``: steps.json.gz)
and gives, for every variant, the p50 of each part of the sync step in both cells and how much it grew
(the parts of showdown.py's step_breakdown, pooled over the runs):

- the enqueue;
- the critical worker's hand-over: when the worker whose reply came last (the one the collect waits for)
  had the request, after the enqueue returned; beside it, not parts of it: rank 0's own hand-over in
  both cells (the one worker a single-rank step waits for; with --pin on the same CPU in both) and, in
  the all-rank steps, how much later than the median rank of the same step the critical worker had it
  (a late request makes a late reply, so the worker waited for is more often a late one);
- from that worker's reply until the replies were in hand.

Every step pooled, whatever the executor's speed (the showdown's full-speed view is not applied here).
Medians of parts need not add up to the overhead's median.

Then the same two cells matched on the critical worker's speed. A vCPU of a VM may run Python 1.6-1.9x
slower for tens of ms to seconds (docs/platform.md, "Python's speed episodes"), and a slow vCPU runs
the worker's own Python of the step (unpickling the request, pickling the reply, the calls around
them) slower too. An all-rank step waits for the slowest of W workers, a single-rank step for rank 0
alone, so the all-rank cell holds far more steps whose critical worker ran slow. The critical worker's
speed is its work's CPU time over its full-speed time (1.0): the showdown's own reference, the fastest
tenth of the critical worker's work over every run of the showdown (the dump's speed_refs_us; an older
dump without it: the fastest tenth of these two cells' steps); the
steps fall into classes of it (below 1.3, 1.3-1.6, 1.6-1.9, from 1.9), and the single-rank steps are
weighted so that their classes weigh what they weigh among the all-rank steps: the weighted median is
what a single-rank step would cost had its worker run at the all-rank steps' speeds. A class with
fewer than 20 single-rank steps cannot be weighted and is left out of both sides; the share of
all-rank steps left in (coverage) says how far the comparison reaches. A dump without the critical
worker's work time (older showdowns) gets no such view.

Says where the time goes, not why; measures and prints, asserts nothing.

    python3 bench/showdown/all_single.py out/w8/steps.json.gz [--json FILE]
"""
import argparse
import gzip
import json
import statistics
import sys

PARTS = ("overhead", "enqueue", "last_worker_has_it", "has_it_rank0", "reply_to_collected")
# Class bounds of the critical worker's work time over its full-speed time: 1.3 is the showdown's own
# "full speed" bound (showdown.FULL_SPEED_WITHIN); a slow episode runs the loop 1.6-1.9x slower.
SPEED_EDGES = (1.3, 1.6, 1.9)
# Single-rank steps a class needs to be weighted: under it a class's median is a handful of steps. An
# episode lasts tens to hundreds of steps, so even a class that passes may hold one or two episodes:
# the counts are printed beside it.
MIN_CLASS_STEPS = 20


class DumpError(Exception):
    pass


def sync_runs(dump, kind, replies):
    return [r["steps"] for r in dump["runs"] if r["kind"] == kind and r["mode"] == "sync" and r["replies"] == replies]


def pooled_p50(runs, key, where):
    values = []
    for steps in runs:
        if key not in steps:
            raise DumpError(f"a {where} run has no '{key}' column (not a showdown step dump, or an older one)")
        values.extend(steps[key])
    if not values:
        raise DumpError(f"the {where} runs hold no steps")
    return statistics.median(values)


def critical_after_median_rank(runs):
    """p50 over the all-rank steps of (the critical worker's hand-over - the median of that step's ranks')."""
    diffs = []
    for steps in runs:
        ranks = sorted(k for k in steps if k.startswith("has_it_rank"))
        if not ranks:
            raise DumpError("an all-rank run has no has_it_rank* columns")
        columns = [steps[k] for k in ranks]
        if any(len(c) != len(steps["last_worker_has_it"]) for c in columns):
            raise DumpError("an all-rank run's has_it_rank* columns are not as long as its other columns")
        for i, critical in enumerate(steps["last_worker_has_it"]):
            diffs.append(critical - statistics.median(c[i] for c in columns))
    if not diffs:
        raise DumpError("the all-rank runs hold no steps")
    return statistics.median(diffs)


def speed_class(factor):
    return sum(factor >= edge for edge in SPEED_EDGES)


def weighted_median(pairs):
    """The lower weighted median of (value, weight) pairs with positive total weight."""
    pairs = sorted(pairs)
    half, acc = sum(w for _, w in pairs) / 2, 0.0
    for value, weight in pairs:
        acc += weight
        if acc >= half:
            return value
    raise DumpError("no weighted steps")


def p50_or_none(values):
    return statistics.median(values) if values else None


def speed_matched(single, every, ref=None):
    """The single- against the all-rank cell's overhead at the same speeds of the critical worker (the
    module's docstring says how), or None where the dump has no critical worker's work time. `ref`: the
    critical worker's work time at full speed, us — the showdown's own (the dump's speed_refs_us), else
    the fastest tenth of these two cells' steps."""
    if any("critical_work_cpu_us" not in steps for steps in single + every):
        return None
    def pooled(runs):
        steps = []
        for run in runs:
            if any(len(run[k]) != len(run["overhead"]) for k in ("critical_work_cpu_us", "last_worker_has_it")):
                raise DumpError("a run's critical_work_cpu_us or last_worker_has_it column is not as long as its overhead column")
            steps.extend(zip(run["overhead"], run["critical_work_cpu_us"], run["last_worker_has_it"]))
        return steps
    s_steps, a_steps = pooled(single), pooled(every)
    if not s_steps or not a_steps:
        raise DumpError("a cell holds no steps")
    if ref is None or ref <= 0:
        works = sorted(w for _, w, _ in s_steps + a_steps)
        ref = works[len(works) // 10]
    if ref <= 0:
        raise DumpError("the critical worker's work time is zero")
    s_class = [speed_class(w / ref) for _, w, _ in s_steps]
    a_class = [speed_class(w / ref) for _, w, _ in a_steps]
    classes = []
    for c in range(len(SPEED_EDGES) + 1):
        s_in = [t for t, k in zip(s_steps, s_class) if k == c]
        a_in = [t for t, k in zip(a_steps, a_class) if k == c]
        classes.append({"from": 0.0 if c == 0 else SPEED_EDGES[c - 1], "to": SPEED_EDGES[c] if c < len(SPEED_EDGES) else None,
                        "single_steps": len(s_in), "all_steps": len(a_in),
                        "single_share": len(s_in) / len(s_steps), "all_share": len(a_in) / len(a_steps),
                        "overhead_single_p50_us": p50_or_none([t[0] for t in s_in]),
                        "overhead_all_p50_us": p50_or_none([t[0] for t in a_in]),
                        "has_it_single_p50_us": p50_or_none([t[2] for t in s_in]),
                        "has_it_all_p50_us": p50_or_none([t[2] for t in a_in]),
                        "weighted": len(s_in) >= MIN_CLASS_STEPS})
    kept = [c for c, k in enumerate(classes) if k["weighted"] and k["all_share"] > 0]
    out = {"work_ref_us": ref, "classes": classes, "coverage": sum(classes[c]["all_share"] for c in kept),
           "overhead_single_reweighted_p50_us": None, "overhead_all_covered_p50_us": None}
    if kept:
        weight = {c: classes[c]["all_share"] / classes[c]["single_share"] for c in kept}
        # Both sides the lower median: the weighted one's, and the covered all-rank steps' plain one.
        out["overhead_single_reweighted_p50_us"] = weighted_median(
            [(t[0], weight[k]) for t, k in zip(s_steps, s_class) if k in weight])
        out["overhead_all_covered_p50_us"] = statistics.median_low(t[0] for t, k in zip(a_steps, a_class) if k in weight)
    return out


def analyse(dump):
    if not isinstance(dump, dict) or not isinstance(dump.get("runs"), list):
        raise DumpError("no 'runs' list (not a showdown step dump: showdown.json is the summary, steps.json.gz the dump)")
    cells = []
    for kind in sorted({r["kind"] for r in dump["runs"] if r["mode"] == "sync"}):
        single, every = sync_runs(dump, kind, "single"), sync_runs(dump, kind, "all")
        if not single or not every:
            continue
        cell = {"kind": kind, "variant": next(r["variant"] for r in dump["runs"] if r["kind"] == kind),
                "workers": len([k for k in every[0] if k.startswith("has_it_rank")])}
        for part in PARTS:
            cell[f"{part}_single_p50_us"] = pooled_p50(single, part, "single-rank")
            cell[f"{part}_all_p50_us"] = pooled_p50(every, part, "all-rank")
        cell["critical_after_median_rank_p50_us"] = critical_after_median_rank(every)
        cell["speed_matched"] = speed_matched(single, every, (dump.get("speed_refs_us") or {}).get("worker"))
        cells.append(cell)
    if not cells:
        raise DumpError("no variant with both single- and all-rank sync steps")
    return cells


def report(cells, bound=1.10):
    def grew(c, part):
        s, a = c[f"{part}_single_p50_us"], c[f"{part}_all_p50_us"]
        return f"{s:.1f} -> {a:.1f} ({a - s:+.1f})"
    lines = ["an all-rank sync step against a single-rank one, p50 us pooled over the runs (single -> all, the growth);",
             "the critical worker: the one whose reply came last; rank 0 and 'after its step's median rank' are beside",
             "its hand-over, not parts of it; medians of parts need not add up:"]
    for c in cells:
        allowed = (bound - 1) * c["overhead_single_p50_us"]
        lines.append(
            f"{c['variant']:<30} W={c['workers']}: overhead {grew(c, 'overhead')}, the line allows {allowed:+.1f}; "
            f"enqueue {grew(c, 'enqueue')}; the critical worker had it {grew(c, 'last_worker_has_it')} "
            f"(rank 0 {grew(c, 'has_it_rank0')}; the critical one after its step's median rank "
            f"{c['critical_after_median_rank_p50_us']:+.1f}); reply -> collected {grew(c, 'reply_to_collected')}")
    lines.append("")
    lines.append("matched on the critical worker's speed (its work's CPU time over its full-speed time; per class the")
    lines.append("single- / all-rank steps in it, their overhead p50 and the critical worker's hand-over p50, us; the")
    lines.append(f"single-rank steps weighted to the all-rank steps' classes; a class of < {MIN_CLASS_STEPS} single-rank steps is left out):")
    for c in cells:
        m = c["speed_matched"]
        if m is None:
            lines.append(f"{c['variant']:<30} no critical worker's work time in this dump (an older showdown)")
            continue
        def fmt(v):
            return "-" if v is None else f"{v:.1f}"
        def ratio(a, b):
            return "-" if not b else f"{a / b:.2f}"
        parts = []
        for k in m["classes"]:
            span = f"x{k['from']:.1f}-" + ("" if k["to"] is None else f"{k['to']:.1f}")
            parts.append(f"{span} {k['single_steps']}/{k['all_steps']} {fmt(k['overhead_single_p50_us'])}/"
                         f"{fmt(k['overhead_all_p50_us'])} ({fmt(k['has_it_single_p50_us'])}/{fmt(k['has_it_all_p50_us'])})")
        lines.append(f"{c['variant']:<30} work at full speed {m['work_ref_us']:.0f} us; " + "; ".join(parts))
        rw, cov = m["overhead_single_reweighted_p50_us"], m["overhead_all_covered_p50_us"]
        if rw is None:
            lines.append(f"{'':<30} no class holds both cells' steps: not comparable")
        else:
            lines.append(f"{'':<30} all / single {ratio(c['overhead_all_p50_us'], c['overhead_single_p50_us'])} as measured; "
                         f"at the all-rank steps' speeds {cov:.1f} / {rw:.1f} = {ratio(cov, rw)} "
                         f"(coverage {m['coverage']:.0%} of the all-rank steps)")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("steps", help="a showdown's steps.json.gz (--dump-steps)")
    ap.add_argument("--json", default=None, help="also write the figures here")
    args = ap.parse_args(argv)
    try:
        with gzip.open(args.steps, "rt") as f:
            dump = json.load(f)
    except (OSError, ValueError) as e:
        raise SystemExit(f"all_single: cannot read {args.steps} as a showdown's steps.json.gz: {e}")
    try:
        cells = analyse(dump)
    except (DumpError, KeyError, TypeError) as e:
        raise SystemExit(f"all_single: {args.steps}: {e}")
    if dump.get("settle_others"):
        print("(--settle-others: these single-rank steps started with every worker waiting, as all-rank ones do)")
    print(report(cells))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(cells, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
