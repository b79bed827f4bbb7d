import os
import json, sys, re, bisect, collections, statistics as S
exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'crit.py')).read().split("rows = []")[0])
cnt = collections.Counter(); tot = collections.Counter(); n = len(js["steps"])
lostcrit = []
for i, (n0, n1, n2, reps) in enumerate(js["steps"]):
    rank, tr, ts, cpu = max(reps, key=lambda r: r[2]); p = rank_pid[rank]
    by = collections.Counter()
    for s, e, c in wait_iv[p]:
        a, b = max(s, tr - 30000), min(e, ts)   # include 30us before its receive: the wait for its CPU to get the request
        if b <= a: continue
        tl = cpu_tl[c]; k = bisect.bisect_right(tl, (a, 1 << 62)) - 1
        t = a
        while t < b:
            nxt = tl[k+1][0] if k+1 < len(tl) else b
            who = 'exec' if tl[k][1] == exe else ('worker' if tl[k][1] in workers else 'other')
            by[who] += min(nxt, b) - t
            t = min(nxt, b); k += 1
    for who, v in by.items():
        if v > 10000: cnt[who] += 1
        tot[who] += v
print(sys.argv[1], "steps where crit lost >10us to:", {k: round(v/n, 2) for k, v in cnt.items()}, " mean us/step:", {k: round(v/n/1e3, 1) for k, v in tot.items()})
