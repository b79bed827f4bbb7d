# The per-step capture behind the "what the critical path lost" rule (run from the repository root with
# PYTHONPATH=build/python): showdown.py's own run_variant for (a) and (c), async mode (prep 2 ms, work
# 1 ms), W=2, single- and all-rank, 600 steps, 3 rounds; every step's breakdown kept (steps.json).
import json, sys
sys.path.insert(0, "bench/showdown")
sys.argv = ["showdown.py"]
import showdown
CAP = []
orig = showdown.cpu_lost
def cap(parts):
    CAP.append([{k: t[k] for k in ("overhead", "prep_stalled", "work_stalled", "last_reply_after_prep",
                                   "collected_after_both", "enqueue", "work", "last_worker_has_it")} for t in parts])
    return orig(parts)
showdown.cpu_lost = cap
work, prep = showdown.Compute(1e-3), showdown.Compute(2e-3)
showdown.SPEED_PROBE = showdown.Compute(10e-6)
out = []
for rep in range(3):
    for kind in "ac":
        for reply_all in (False, True):
            r = showdown.run_variant(kind, 2, 600, work, reply_all, prep, 0.2)
            out.append({"kind": kind, "all": reply_all, "rep": rep, "ovh": r["overhead_p50_us"], "steps": CAP[-1]})
json.dump(out, open("steps.json", "w"))
