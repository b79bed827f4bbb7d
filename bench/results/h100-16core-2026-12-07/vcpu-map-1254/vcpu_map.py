"""Which vCPUs of this VM share a core of the host? Two measurements per vCPU pair (a, b):
  1. the atomic hand-off round trip between processes pinned on a and b (ringcast-line-home, 2 pairs,
     the median of its pairs' p50s): a pair of SMT siblings hands a line over through their shared L1/L2,
     far faster than any two cores;
  2. the showdown's work (a pure-Python loop, ~20 ms) on a while the same loop runs on b, against it
     alone on a (best of 3 each): siblings share a core's pipelines, so each runs slower.
Usage: python3 vcpu_map.py LINE_HOME_BINARY [--cpus N]"""
import itertools, os, re, statistics, subprocess, sys, time

binary = sys.argv[1]
cpus = sorted(os.sched_getaffinity(0))


def spin(n):
    x = 0
    for i in range(n):
        x += i
    return x


def loop_time(n):
    t0 = time.thread_time()
    spin(n)
    return time.thread_time() - t0


def calibrate():
    os.sched_setaffinity(0, {cpus[-1]})
    n = 20000
    best = min(loop_time(n) for _ in range(5))
    return max(1, int(n * 0.020 / best))


N = calibrate()


def run_on(cpu, go_r, done_w, reps):
    pid = os.fork()
    if pid == 0:
        os.sched_setaffinity(0, {cpu})
        spin(N // 10)  # warm
        os.read(go_r, 1)
        ts = [loop_time(N) for _ in range(reps)]
        os.write(done_w, (repr(ts) + "\n").encode())
        os._exit(0)
    return pid


def together(a, b, reps=3):
    """a's loop times while b runs the same loop (b None: alone)."""
    go_r, go_w = os.pipe()
    done_r, done_w = os.pipe()
    pids = [run_on(a, go_r, done_w, reps)]
    if b is not None:
        pids.append(run_on(b, go_r, done_w, reps + 1))  # b keeps running while a measures
    time.sleep(0.05)
    os.write(go_w, b"x" * len(pids))
    out = b""
    while out.count(b"\n") < len(pids):
        out += os.read(done_r, 1 << 16)
    for p in pids:
        os.waitpid(p, 0)
    for fd in (go_r, go_w, done_r, done_w):
        os.close(fd)
    lines = [eval(x) for x in out.split(b"\n") if x.strip()]
    a_times = min(lines, key=len)
    return min(a_times)


def handoff(a, b):
    out = subprocess.run([binary, "--cpus", f"{a},{b}", "--pairs", "2", "--trips", "5000", "--rounds", "1"],
                         capture_output=True, text=True, timeout=60).stdout
    m = re.search(r"^round 1:((?: +\d+)+)$", out, re.M)
    return statistics.median(float(x) for x in m.group(1).split())


alone = {c: together(c, None) for c in cpus}
print(f"vCPUs {cpus}; the work loop alone, ms (best of 3, ~20 ms calibrated):",
      " ".join(f"{c}:{alone[c]*1e3:.1f}" for c in cpus), flush=True)
rows = []
for a, b in itertools.combinations(cpus, 2):
    h = handoff(a, b)
    slow = together(a, b) / alone[a]
    rows.append((a, b, h, slow))
    print(f"pair {a:2d},{b:2d}: hand-off p50 {h:5.0f} ns   work beside the other {slow:.2f}x alone", flush=True)
print("\nfastest hand-offs:")
for a, b, h, s in sorted(rows, key=lambda r: r[2])[:12]:
    print(f"  {a:2d},{b:2d}: {h:5.0f} ns, work {s:.2f}x")
print("most slowed work:")
for a, b, h, s in sorted(rows, key=lambda r: -r[3])[:12]:
    print(f"  {a:2d},{b:2d}: work {s:.2f}x, hand-off {h:5.0f} ns")
hs = sorted(r[2] for r in rows); ss = sorted(r[3] for r in rows)
print(f"\nall {len(rows)} pairs: hand-off {hs[0]:.0f}..{statistics.median(hs):.0f}..{hs[-1]:.0f} ns (min..median..max); "
      f"work beside another {ss[0]:.2f}..{statistics.median(ss):.2f}..{ss[-1]:.2f}x")
