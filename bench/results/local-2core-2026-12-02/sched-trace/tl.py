import sys, re, json
data, js, idx = sys.argv[1], json.load(open(sys.argv[2])), int(sys.argv[3])
exe = js["pid"]
n0, n1, n2, reps = js["steps"][idx]
print("step", idx, "n0", 0, "n1 %.1f" % ((n1-n0)/1e3), "n2 %.1f" % ((n2-n0)/1e3), "replies (rank, recv, sent, cpu):", [(r[0], round((r[1]-n0)/1e3,1), round((r[2]-n0)/1e3,1), round(r[3]*1e6,1)) for r in reps])
for line in open(data):
    m = re.match(r'\s*\[(\d+)\]\s+([\d.]+):\s+(\S+):\s+(.*)', line)
    if not m: continue
    t = int(float(m.group(2)) * 1e9)
    if t < n0 - 20000 or t > n2 + 5000: continue
    rest = m.group(4).replace(f"pid={exe}", "pid=EXEC")
    rest = re.sub(r'prev_prio=\d+ |next_prio=\d+|prio=\d+ ', '', rest)
    print(f"{(t-n0)/1e3:9.1f} cpu{m.group(1)} {m.group(3).split(':')[1]:<20} {rest}")
