"""Per-step analysis of a showdown's steps.json.gz: per variant/replies/mode, per run, the p50 of chosen
parts over all steps and over full-speed steps; and the request pickling against the executor probe."""
import gzip, json, statistics, sys
d = json.load(gzip.open(sys.argv[1], "rt"))
keys = sys.argv[2].split(",") if len(sys.argv) > 2 else ["overhead", "request_pickle", "enqueue_but_pickling", "request_unpickle", "worker_has_it_but_unpickling", "collected_but_pickling", "executor_probe_us"]
print("speed refs", {k: round(v, 1) for k, v in d["speed_refs_us"].items()})
groups = {}
for r in d["runs"]:
    groups.setdefault((r["kind"], r["replies"], r["mode"]), []).append(r)
def med(xs):
    xs = list(xs)
    return statistics.median(xs) if xs else float("nan")
def rows(r):
    c = r["steps"]; return [dict(zip(c, v)) for v in zip(*c.values())]
for r in d["runs"]: r["steps"] = rows(r)
for g, runs in groups.items():
    if g[2] != "sync" and "request_pickle" in keys: continue
    print(g)
    for k in keys:
        if k not in runs[0]["steps"][0]: continue
        per_run = [med(t[k] for t in r["steps"]) for r in runs]
        fast = [t[k] for r in runs for t in r["steps"] if t["full_speed"]]
        allv = [t[k] for r in runs for t in r["steps"]]
        print(f"  {k:<30} runs " + " ".join(f"{v:6.1f}" for v in per_run) + f" | pooled {med(allv):6.1f} | full-speed {med(fast):6.1f} (n={len(fast)})")
    # ratio of request pickling to the probe, step by step (the CPU's speed taken out)
    if "request_pickle" in runs[0]["steps"][0]:
        ratio = [t["request_pickle"] / t["executor_probe_us"] for r in runs for t in r["steps"] if t["executor_probe_us"] > 0]
        print(f"  request_pickle / probe: p50 {med(ratio):.3f}")
