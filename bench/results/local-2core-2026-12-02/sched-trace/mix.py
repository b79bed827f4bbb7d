import json, sys, statistics as S
print("run              ovh p50 | disturbed steps: crit lost CPU>10us  has>35  collected>25  any | ovh p50 of undisturbed steps | their parts has/wall-cpu/collected")
for f in sys.argv[1:]:
    js = json.load(open(f)); rows = []
    for n0, n1, n2, reps in js["steps"]:
        rank, tr, ts, cpu = max(reps, key=lambda r: r[2])
        ov = (n2-n0)/1e3 - max(r[3] for r in reps)*1e6
        rows.append((ov, (tr-n0)/1e3, (ts-tr)/1e3-cpu*1e6, (n2-ts)/1e3))
    n = len(rows)
    lost = sum(r[2] > 10 for r in rows)/n; has = sum(r[1] > 35 for r in rows)/n; col = sum(r[3] > 25 for r in rows)/n
    good = [r for r in rows if not (r[2] > 10 or r[1] > 35 or r[3] > 25)]
    anyd = 1 - len(good)/n
    print(f"{f.split('/')[-1]:<14} {S.median(r[0] for r in rows):7.1f} | {lost:5.2f} {has:5.2f} {col:5.2f} {anyd:5.2f} | {S.median(r[0] for r in good):6.1f} | {S.median(r[1] for r in good):.1f} / {S.median(r[2] for r in good):.1f} / {S.median(r[3] for r in good):.1f}")
