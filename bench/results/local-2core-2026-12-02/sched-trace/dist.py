import json, sys, statistics as S
for f in sys.argv[1:]:
    js = json.load(open(f)); rows = []
    for n0, n1, n2, reps in js["steps"]:
        crit = max(reps, key=lambda r: r[2]); rank, tr, ts, cpu = crit
        ov = (n2-n0)/1e3 - max(r[3] for r in reps)*1e6
        rows.append((ov, (tr-n0)/1e3, (ts-tr)/1e3-cpu*1e6, (n2-ts)/1e3, max(r[3] for r in reps)*1e6 - cpu*1e6))
    q = lambda i: " ".join(f"{sorted(r[i] for r in rows)[int(p*len(rows))]:.0f}" for p in (0.1,0.25,0.5,0.75,0.9))
    print(f, "ovh", q(0), "| has", q(1), "| wall-cpu", q(2), "| collected", q(3), "| maxcpu-critcpu", q(4))
