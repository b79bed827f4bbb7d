"""The probe behind probe_w2.txt / probe_w8.txt (16-core machine, 2026-12-01 ~21:55 UTC), kept as it ran
from a scratch folder one level under the repository root: `probe_trace.py W REPEATS VARIANTS MODES`
(e.g. 8 4 abcs single,all). Sync steps only, the showdown's --trace split (pickling taken out of each
part), 0.2 s idle windows; variant s is what the showdown now has as (e), wait="spin" everywhere."""
import os, sys, statistics
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "bench", "showdown"))
import showdown as sd
import pickle_clock

class CSpin(sd.RingcastGather):
    name = "(c) wait=spin everywhere"
    options = {"wait": "spin"}
sd.TRANSPORTS["s"] = CSpin

def main():
    workers, reps, variants = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    modes = sys.argv[4] if len(sys.argv) > 4 else "all"
    plan, text = sd.plan_pinning("auto", workers)
    if plan:
        sd.PINNING.update(plan); os.sched_setaffinity(0, plan["executor"])
    print("pin:", text, flush=True)
    pickle_clock.install(sd.TRACED_PICKLERS)
    work, no_prep = sd.Compute(1e-3), sd.Compute(0)
    keys = ("overhead", "pickling", "enqueue_but_pickling", "worker_has_it_but_unpickling", "collected_but_pickling", "overhead_but_pickling")
    res = {}
    for rep in range(reps):
        for reply_all in [m == "all" for m in modes.split(",")]:
            for v in variants:
                r = sd.run_variant(v, workers, 300, work, reply_all, no_prep, 0.2)
                b = r["breakdown_p50_us"]
                res.setdefault((v, reply_all), []).append(b)
                print(f"W={workers} rep {rep+1} {r['variant']:<28} {r['replies']:<6} " + " ".join(f"{k[:12]} {b[k]:6.1f}" for k in keys)
                      + f" sleeps w {r['worker_sleeps_per_step']} e {r['executor_sleeps_per_step']}", flush=True)
    print("medians")
    for (v, ra), bs in res.items():
        print(f"{v} {'all' if ra else 'single'} " + " ".join(f"{k[:12]} {statistics.median(b[k] for b in bs):6.1f}" for k in keys))
main()
