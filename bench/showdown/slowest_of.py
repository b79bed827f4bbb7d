#!/usr/bin/env python3
"""Why an all-rank sync step is longer than a single-rank one: the slowest of W workers.

Reads the step dump of a showdown (``showdown.py --dump-steps``: steps.json.gz) and splits, for every
variant, how much later the critical worker of an all-rank sync step had the request than the one
worker of a single-rank step:

- together: every worker had it later because all W computed and unpickled at once (each rank's p50 in
  the all-rank steps against the single-rank worker's p50);
- the slowest of W: the step waits for the last of W workers (the last one's p50 against each rank's);
  and what W independent draws, one from each rank's own times in the all-rank steps, predict for it
  (a bootstrap): if the prediction matches, the last worker is just the slowest of W draws of the same
  work, which any transport that hands a request to W Python processes pays.

Beside it: how much longer the all-rank step's overhead was than the single-rank one's, and what the
all / single <= 1.10 line allows (a tenth of the single-rank overhead). Times are µs after the enqueue
returned (has_it_rank*), pooled over the runs. Measures and prints; asserts nothing.

    python3 bench/showdown/slowest_of.py out/w8/steps.json.gz [--draws 20000] [--seed 1] [--json FILE]
"""
import argparse
import gzip
import json
import random
import statistics
import sys


def _column(steps, key):
    return steps.get(key) or []


def cell_steps(dump, kind, replies):
    """Every sync step of one variant and reply set, pooled over the runs: a list of dicts of columns."""
    return [r["steps"] for r in dump["runs"] if r["kind"] == kind and r["mode"] == "sync" and r["replies"] == replies]


def ranks_of(steps_list):
    keys = set()
    for s in steps_list:
        keys |= {k for k in s if k.startswith("has_it_rank")}
    return sorted(int(k[len("has_it_rank"):]) for k in keys)


def all_rank_rows(steps_list, ranks):
    """One row per all-rank step: every rank's time, steps where a rank's time is missing left out."""
    rows = []
    for s in steps_list:
        cols = [_column(s, f"has_it_rank{k}") for k in ranks]
        for i in range(min(len(c) for c in cols)):
            row = [c[i] for c in cols]
            if None not in row:
                rows.append(row)
    return rows


def max_of_draws(per_rank, draws, rng):
    """p50 of the max of one independent draw from each rank's own times (a bootstrap)."""
    return statistics.median(max(rng.choice(values) for values in per_rank) for _ in range(draws))


def analyse(dump, draws=20000, seed=1):
    out = []
    kinds = sorted({r["kind"] for r in dump["runs"] if r["mode"] == "sync"})
    for kind in kinds:
        single, every = cell_steps(dump, kind, "single"), cell_steps(dump, kind, "all")
        if not single or not every:
            continue
        ranks = ranks_of(every)
        rows = all_rank_rows(every, ranks)
        one = [x for s in single for x in _column(s, "has_it_rank0") if x is not None]
        if not rows or not one:
            continue
        per_rank = [[row[j] for row in rows] for j in range(len(ranks))]
        each = statistics.median(x for row in rows for x in row)
        last = statistics.median(max(row) for row in rows)
        predicted = max_of_draws(per_rank, draws, random.Random(seed))
        ovh_single = statistics.median(x for s in single for x in _column(s, "overhead") if x is not None)
        ovh_all = statistics.median(x for s in every for x in _column(s, "overhead") if x is not None)
        variant = next(r["variant"] for r in dump["runs"] if r["kind"] == kind)
        out.append({
            "kind": kind, "variant": variant, "workers": len(ranks), "all_rank_steps": len(rows),
            "single_rank_steps": len(one),
            "single_worker_has_it_p50_us": statistics.median(one),
            "each_rank_has_it_p50_us": each,
            "last_worker_has_it_p50_us": last,
            "last_predicted_p50_us": predicted,
            "overhead_single_p50_us": ovh_single,
            "overhead_all_p50_us": ovh_all,
        })
    return out


def report(cells, bound=1.10):
    lines = [
        "the all-rank sync step's critical hand-over against the single-rank one's (p50 us after the enqueue returned,",
        "pooled over the runs): 'together' = each rank in the all-rank steps against the single-rank worker; 'slowest",
        "of W' = the last worker against each rank; 'predicted' = the p50 of the max of W independent draws, one from",
        "each rank's own times; then the overhead p50 single- and all-rank and what the all / single line allows:",
    ]
    for c in cells:
        together = c["each_rank_has_it_p50_us"] - c["single_worker_has_it_p50_us"]
        slowest = c["last_worker_has_it_p50_us"] - c["each_rank_has_it_p50_us"]
        grew = c["overhead_all_p50_us"] - c["overhead_single_p50_us"]
        allowed = (bound - 1) * c["overhead_single_p50_us"]
        lines.append(
            f"{c['variant']:<30} W={c['workers']}: single {c['single_worker_has_it_p50_us']:.1f}, each rank "
            f"{c['each_rank_has_it_p50_us']:.1f} (together {together:+.1f}), last {c['last_worker_has_it_p50_us']:.1f} "
            f"(slowest of {c['workers']} {slowest:+.1f}; predicted {c['last_predicted_p50_us']:.1f}); overhead "
            f"{c['overhead_single_p50_us']:.1f} -> {c['overhead_all_p50_us']:.1f} ({grew:+.1f}; the line allows "
            f"{allowed:+.1f}); steps {c['single_rank_steps']} / {c['all_rank_steps']}")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("steps", help="a showdown's steps.json.gz (--dump-steps)")
    ap.add_argument("--draws", type=int, default=20000, help="bootstrap draws of the slowest of W")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", default=None, help="also write the figures here")
    args = ap.parse_args(argv)
    if args.draws < 1:
        ap.error("--draws must be at least 1")
    try:
        with gzip.open(args.steps, "rt") as f:
            dump = json.load(f)
    except (OSError, ValueError) as e:
        raise SystemExit(f"slowest_of: cannot read {args.steps} as a showdown's steps.json.gz: {e}")
    cells = analyse(dump, args.draws, args.seed)
    if not cells:
        raise SystemExit(f"slowest_of: {args.steps} has no variant with both single- and all-rank sync steps")
    print(report(cells))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(cells, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
