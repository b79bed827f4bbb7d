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
Medians of parts need not add up to the overhead's median. Says where the time goes, not why;
measures and prints, asserts nothing.

    python3 bench/showdown/all_single.py out/w8/steps.json.gz [--json FILE]
"""
import argparse
import gzip
import json
import statistics
import sys

PARTS = ("overhead", "enqueue", "last_worker_has_it", "has_it_rank0", "reply_to_collected")


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
