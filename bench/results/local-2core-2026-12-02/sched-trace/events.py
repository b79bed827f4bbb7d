import sys, re, json, collections
data, js = sys.argv[1], json.load(open(sys.argv[2])); exe = js["pid"]; nsteps = len(js["steps"])
t0 = js["steps"][0][0]; t1 = js["steps"][-1][2]
wake = collections.Counter(); pre = collections.Counter(); comm = {}
for line in open(data):
    m = re.match(r'\s*\[(\d+)\]\s+([\d.]+):\s+(\S+):\s+(.*)', line)
    if not m: continue
    t = int(float(m.group(2)) * 1e9)
    if t < t0 or t > t1: continue
    name, rest = m.group(3), m.group(4)
    if name == 'sched:sched_wakeup':
        mm = re.search(r'comm=(.*) pid=(\d+)', rest)
        if mm.group(1) == 'python3': wake[int(mm.group(2))] += 1
    elif name == 'sched:sched_switch':
        mm = re.search(r'prev_comm=(.*) prev_pid=(\d+) prev_prio=\d+ prev_state=(\S+) ==> next_comm=(.*) next_pid=(\d+)', rest)
        if mm.group(1) == 'python3' and mm.group(3).startswith('R'):
            pre[(int(mm.group(2)), 'exec' if int(mm.group(5)) == exe else mm.group(4))] += 1
print(sys.argv[1], "wakeups/step:", {("exec" if p == exe else p): round(c / nsteps, 2) for p, c in wake.items()},
      "| switched out while runnable, per step, by next:", {f"{'exec' if p == exe else p}->{n}": round(c / nsteps, 2) for (p, n), c in pre.most_common(8)})
