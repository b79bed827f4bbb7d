import os, sys, json
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "bench", "showdown"))
import showdown as sd
kind, reply_all, steps, out = sys.argv[1], sys.argv[2] == "all", int(sys.argv[3]), sys.argv[4]
log = []
orig = sd.step_breakdown
def wrapped(n0, n1, n_prep, n2, replies, *a):
    log.append((n0, n1, n2, [(r[2], r[3], r[4], r[1]) for r in replies]))
    return orig(n0, n1, n_prep, n2, replies, *a)
sd.step_breakdown = wrapped
work = sd.Compute(0.001)
r = sd.run_variant(kind, 2, steps, work, reply_all, sd.Compute(0), idle_s=0.1)
print(kind, r["replies"], "ovh p50 %.1f" % r["overhead_p50_us"], "exec cpu %.1f%%" % r["executor_cpu_pct"],
      "sleeps", r["executor_sleeps_per_step"], "work %.0f" % r["breakdown_p50_us"]["work"])
json.dump({"pid": os.getpid(), "steps": log}, open(out, "w"))
