"""Scratch probe: does the way a thread waited 1 ms change how fast it pickles right after?"""
import os, sys, time, pickle, statistics
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "bench", "showdown"))
import ringcast
from showdown import scheduler_output
os.sched_setaffinity(0, {int(sys.argv[1]) if len(sys.argv) > 1 else 0})
N = 400
mq = ringcast.MessageQueue(1, 1, wait="spin")
rs = ringcast.MessageQueue.create_from_handle(mq.export_handle(), 0)
mq2 = ringcast.MessageQueue(1, 1)
rh = ringcast.MessageQueue.create_from_handle(mq2.export_handle(), 0)
mq3 = ringcast.MessageQueue(1, 1, wait="spin_yield")
ry = ringcast.MessageQueue.create_from_handle(mq3.export_handle(), 0)
def pyspin():
    end = time.perf_counter() + 0.001
    while time.perf_counter() < end: pass
def pyyield():
    end = time.perf_counter() + 0.001
    while time.perf_counter() < end: os.sched_yield()
def cwait(r):
    def f():
        try: r.dequeue(timeout=0.001)
        except TimeoutError: pass
    return f
def sleep(): time.sleep(0.001)
methods = {"python busy loop": pyspin, "python sched_yield loop": pyyield, "C++ spin (pause)": cwait(rs),
           "C++ spin_yield": cwait(ry), "C++ hybrid default": cwait(rh), "time.sleep": sleep}
res = {m: ([], []) for m in methods}
for rep in range(N):
    for m, f in methods.items():
        obj = scheduler_output(rep)
        f()
        t0 = time.perf_counter_ns(); pickle.dumps(obj, protocol=5); t1 = time.perf_counter_ns()
        pickle.dumps(obj, protocol=5); t2 = time.perf_counter_ns()
        res[m][0].append(t1 - t0); res[m][1].append(t2 - t1)
for m, (a, b) in res.items():
    print(f"{m:<26} pickle right after the wait p50 {statistics.median(a)/1e3:5.2f} us  (again: {statistics.median(b)/1e3:5.2f})")
