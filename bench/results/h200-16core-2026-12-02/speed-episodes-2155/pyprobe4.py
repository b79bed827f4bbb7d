# Does this VM's own load slow a Python loop (vCPUs that share a host core)? Probe on CPU 3 while k of
# the other CPUs run the same pure-Python loop (busy) or a C-like pause spin is not possible in Python.
import os, sys, time, multiprocessing as mp
def spin(n):
    x = 0
    for i in range(n):
        x += i
    return x
def hog(cpu, stop):
    os.sched_setaffinity(0, {cpu})
    while not stop.is_set():
        spin(20000)
def probe(n, iters):
    v = []
    for _ in range(iters):
        t0 = time.thread_time_ns(); spin(n); v.append((time.thread_time_ns() - t0) / 1000)
    return v
if __name__ == "__main__":
    os.sched_setaffinity(0, {3}); n = 20762
    others = [c for c in range(os.cpu_count()) if c != 3]
    for rep in range(3):
        for k in (0, 1, 3, 7, 15):
            stop = mp.Event(); ps = [mp.Process(target=hog, args=(c, stop)) for c in others[:k]]
            for p in ps: p.start()
            time.sleep(0.1)
            v = probe(n, 300)
            stop.set()
            for p in ps: p.join()
            s = sorted(v)
            print(f"rep {rep} busy others {k:2d}: slow {sum(x > 850 for x in v):3d}/300, p10 {s[30]:5.0f} p50 {s[150]:5.0f} p90 {s[270]:5.0f}", flush=True)
