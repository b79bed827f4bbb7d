"""Scratch probe: is today's sync-all miss the 2 ms spin_max boundary? (c) vs (c) with spin_max_us=5000."""
import os, sys, statistics
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "bench", "showdown"))
import showdown as sd

class C5(sd.RingcastGather):
    name = "(c5) spin_max_us=5000"
    options = {"spin_max_us": 5000.0}
sd.TRANSPORTS["5"] = C5

def main():
    reps = int(sys.argv[1]); variants = sys.argv[2]
    for workers in (2, 8):
        plan, text = sd.plan_pinning("auto", workers)
        sd.PINNING.update(plan); os.sched_setaffinity(0, plan["executor"])
        work, no_prep = sd.Compute(1e-3), sd.Compute(0)
        for rep in range(reps):
            for reply_all in (False, True):
                for v in variants:
                    r = sd.run_variant(v, workers, 300, work, reply_all, no_prep, 0.3)
                    b = r["breakdown_p50_us"]
                    print(f"W={workers} rep {rep+1} {r['variant']:<26} {r['replies']:<6} p50 {r['p50_us']:7.1f} ovh {r['overhead_p50_us']:6.1f} "
                          f"exec cpu {r['executor_cpu_pct']:5.1f} exec sleeps {r['executor_sleeps_per_step']} | enq {b['enqueue']:5.1f} "
                          f"last {b['last_worker_has_it']:5.1f} work {b['work']:7.1f} r->c {b['reply_to_collected']:5.1f}", flush=True)

main()
