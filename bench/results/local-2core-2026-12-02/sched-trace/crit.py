import sys, re, json, collections, bisect, statistics
data, js = sys.argv[1], json.load(open(sys.argv[2]))
ev = []
for line in open(data):
    m = re.match(r'\s*\[(\d+)\]\s+([\d.]+):\s+(\S+):\s+(.*)', line)
    if m: ev.append((int(float(m.group(2)) * 1e9), int(m.group(1)), m.group(3), m.group(4)))
exe = js["pid"]
# intervals: per pid list of (start, end, state, cpu, runner-of-cpu-changes...) -- build per-CPU running timeline
running = {}; waiting = {}; comm = {}
cpu_tl = collections.defaultdict(list)   # cpu -> [(t, pid running from t)]
wait_iv = collections.defaultdict(list)  # pid -> [(t0, t1, cpu)]
run_iv = collections.defaultdict(list)   # pid -> [(t0,t1,cpu)]
run_since = {}
for t, cpu, name, rest in ev:
    if name == 'sched:sched_switch':
        m = re.search(r'prev_comm=(.*) prev_pid=(\d+) prev_prio=\d+ prev_state=(\S+) ==> next_comm=(.*) next_pid=(\d+)', rest)
        pp, ps, np_ = int(m.group(2)), m.group(3), int(m.group(5))
        comm[pp] = m.group(1); comm[np_] = m.group(4)
        if pp in run_since: run_iv[pp].append((run_since.pop(pp), t, cpu))
        run_since[np_] = t
        cpu_tl[cpu].append((t, np_))
        if np_ in waiting:
            t0, c = waiting.pop(np_); wait_iv[np_].append((t0, t, cpu))
        if ps.startswith('R'): waiting[pp] = (t, cpu)
    elif name == 'sched:sched_wakeup':
        m = re.search(r'pid=(\d+) prio=\d+ target_cpu=(\d+)', rest)
        pid = int(m.group(1))
        if pid not in run_since: waiting[pid] = (t, int(m.group(2)))
workers = sorted(p for p in run_iv if comm.get(p) == 'python3' and p != exe and len(run_iv[p]) > 100)
def overlap(ivs, a, b):
    return sum(max(0, min(e, b) - max(s, a)) for s, e, *_ in ivs)
def runner_at(cpu, t):
    tl = cpu_tl[cpu]; i = bisect.bisect_right(tl, (t, 1 << 62)) - 1
    return tl[i][1] if i >= 0 else None
# rank -> pid: who runs at t_sent
vote = collections.Counter()
for n0, n1, n2, reps in js["steps"]:
    for rank, tr, ts, cpu in reps:
        for p in workers:
            if overlap(run_iv[p], ts - 1, ts + 1): vote[rank, p] += 1
rank_pid = {}
for (rank, p), c in vote.most_common():
    if rank not in rank_pid and p not in rank_pid.values(): rank_pid[rank] = p
print("workers", workers, "rank->pid", rank_pid, "exec", exe)
rows = []
for n0, n1, n2, reps in js["steps"]:
    rank, tr, ts, cpu = max(reps, key=lambda r: r[2])
    p = rank_pid[rank]
    wall = ts - tr
    w = overlap(wait_iv[p], tr, ts)
    by = collections.Counter()
    for s, e, c in wait_iv[p]:
        a, b = max(s, tr), min(e, ts)
        if b <= a: continue
        # attribute by sampling runner at midpoint, good enough for short waits
        tl = cpu_tl[c]; i = bisect.bisect_right(tl, (a, 1 << 62)) - 1
        t = a
        while t < b:
            j = i + 1
            nxt = tl[j][0] if j < len(tl) else b
            seg = min(nxt, b) - t
            by[tl[i][1] if i >= 0 else -1] += seg
            t = min(nxt, b); i = j
    exe_cpu = overlap(run_iv[exe], tr, ts)
    rows.append((wall / 1e3, cpu * 1e6, w / 1e3, exe_cpu / 1e3, by, (n2 - n0) / 1e3))
st = lambda i: (statistics.median(r[i] for r in rows), statistics.mean(r[i] for r in rows))
print("crit window wall p50/mean %.1f/%.1f us; work cpu %.1f/%.1f; crit runnable-wait %.1f/%.1f; exec cpu in window %.1f/%.1f" % (*st(0), *st(1), *st(2), *st(3)))
tot = collections.Counter()
for r in rows: tot.update(r[4])
print("crit runnable-wait by runner (us/step):", {("exec" if k == exe else comm.get(k, k)) + f"[{k}]": round(v / 1e3 / len(rows), 1) for k, v in tot.most_common(6)})
print("frac steps crit waited >5us: %.2f" % (sum(1 for r in rows if r[2] > 5) / len(rows)))
print("wall - cpu (crit) p50 %.1f" % statistics.median(r[0] - r[1] for r in rows))
