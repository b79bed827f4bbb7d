import json, sys, statistics as S
for f in sys.argv[1:]:
    js = json.load(open(f)); rows = []
    for n0, n1, n2, reps in js["steps"]:
        rank, tr, ts, cpu = max(reps, key=lambda r: r[2])
        first_recv = min(r[1] for r in reps)
        rows.append(((n1-n0)/1e3, (tr-n0)/1e3, (ts-tr)/1e3 - cpu*1e6, (n2-ts)/1e3, (n2-n0)/1e3 - max(r[3] for r in reps)*1e6, (max(r[1] for r in reps)-min(r[1] for r in reps))/1e3))
    m = lambda i: S.median(r[i] for r in rows)
    print(f"{f}: enqueue {m(0):.1f}  crit has it {m(1):.1f}  crit wall-cpu {m(2):.1f}  reply->collected {m(3):.1f}  overhead {m(4):.1f}  recv spread {m(5):.1f}")
