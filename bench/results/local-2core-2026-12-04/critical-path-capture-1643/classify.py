# Splits every captured step (steps.json.gz) by the rule of showdown.py's critical_cpu_loss: lost a CPU
# on its critical path (the preparation stalled > 50 us, or the enqueue went on > 200 us after a worker
# had the request; or, when the critical reply came after the preparation ended, the critical worker's
# work stalled > 50 us or its hand-over took > 200 us) or not; prints per run the count and overhead p50
# of both groups. The capture kept when the LAST collected worker had the request, not the first: the
# enqueue clause uses it (exact for single-rank; all-rank, it can only miss steps whose first worker had
# the request > 200 us and the last < 200 us before the enqueue ended: 4 steps of one run here).
import gzip, json, os, statistics as st
here = os.path.dirname(os.path.abspath(__file__))
def lost_for(t):
    ex = max(t["prep_stalled"], -t["last_worker_has_it"] if -t["last_worker_has_it"] > 200 else 0)
    wk = max(t["work_stalled"], t["last_worker_has_it"] if t["last_worker_has_it"] > 200 else 0) if t["last_reply_after_prep"] > 0 else 0
    return max(ex, wk)
print("variant replies round | run's overhead p50 | lost: steps, overhead p50, lost for (p50) | kept: steps, overhead p50, of them > 500 us")
for r in json.load(gzip.open(os.path.join(here, "steps.json.gz"))):
    L = [t for t in r["steps"] if lost_for(t) > 50]
    K = [t for t in r["steps"] if lost_for(t) <= 50]
    m = lambda g, f=lambda t: t["overhead"]: f"{st.median(f(t) for t in g):.0f}" if g else "-"
    print(f"({r['kind']}) {'all' if r['all'] else 'single':6} {r['rep'] + 1} | {r['ovh']:6.0f} | {len(L):3d} {m(L):>5} {m(L, lost_for):>5} | "
          f"{len(K):3d} {m(K):>5} {sum(t['overhead'] > 500 for t in K):3d}")
