# Is the showdown's "slow state" per process (layout) or per time? Fresh processes run the showdown's
# pure-Python work loop; each prints its median, p10, p90 over 150 loops, and where its objects lie.
import os, subprocess, sys, time, statistics
CHILD = r'''
import os, sys, time, statistics
os.sched_setaffinity(0, {int(sys.argv[2])})
def spin(n):
    x = 0
    for i in range(n):
        x += i
    return x
n = int(sys.argv[1]); v = []
for _ in range(150):
    t0 = time.thread_time(); spin(n); v.append((time.thread_time() - t0) * 1e6)
v.sort()
print(f"{v[75]:7.0f} {v[15]:7.0f} {v[135]:7.0f}  code@{id(spin.__code__)%4096:4d} frame? heap@{id(object())%(1<<21):8d} x@{id(10**7+1)%4096}")
'''
def spin(n):
    x = 0
    for i in range(n):
        x += i
    return x
os.sched_setaffinity(0, {min(3, os.cpu_count() - 1)})
n, best = 20000, 1e9
for _ in range(5):
    t0 = time.thread_time(); spin(n); best = min(best, time.thread_time() - t0)
n = int(n * 0.001 / best)
print("n", n, "per 1 ms; per process: p50 p10 p90 (us)")
for k in range(int(sys.argv[1]) if len(sys.argv) > 1 else 40):
    cpu = (2 + k % 4) % os.cpu_count()
    out = subprocess.run([sys.executable, "-c", CHILD, str(n), str(cpu)], capture_output=True, text=True).stdout.strip()
    print(f"proc {k:2d} cpu {cpu}: {out}", flush=True)
