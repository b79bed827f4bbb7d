"""Session 19 probe: why does a process with torch loaded pickle ~1.8x slower on the 16-core VM?
One configuration per fresh process; prints one JSON line."""
import json, os, sys, time, statistics, pickle, gc
cfg = sys.argv[1]
cpu = int(sys.argv[2])
os.sched_setaffinity(0, {cpu})
t_imp = time.perf_counter()
if cfg in ("torch", "torch_freeze", "torch_nogc", "torch_threads1"):
    if cfg == "torch_threads1":
        os.environ["OMP_NUM_THREADS"] = "1"
    import torch
if cfg == "numpy":
    import numpy
t_imp = time.perf_counter() - t_imp
if cfg == "torch_freeze":
    gc.freeze()
if cfg == "torch_nogc":
    gc.disable()
info = {"cfg": cfg, "cpu": cpu, "import_s": round(t_imp, 2), "affinity": sorted(os.sched_getaffinity(0)),
        "threads": len(os.listdir("/proc/self/task")), "gc_objects": len(gc.get_objects()),
        "gc_threshold": gc.get_threshold(), "trace": repr(sys.gettrace()), "profile": repr(sys.getprofile())}
try:
    info["monitoring"] = [sys.monitoring.get_tool(i) for i in range(6)]
except AttributeError:
    pass
def scheduler_output(step):
    ids = [f"req-{100000 + step}-{i}" for i in range(32)]
    return {"step": step, "req_ids": ids, "num_scheduled_tokens": {r: (i * 7) % 13 + 1 for i, r in enumerate(ids)},
            "block_ids": [[step + i * 16 + j for j in range(16)] for i in range(16)], "finished": []}
def loop(n):
    x = 0
    for i in range(n):
        x += i
    return x
pick, py = [], []
gcs0 = [s["collections"] for s in gc.get_stats()]
for step in range(1, 3001):
    req = scheduler_output(step)
    t0 = time.perf_counter()
    wire = pickle.dumps(req, protocol=5)
    pickle.loads(wire)
    r = pickle.dumps((step, 0.001, 0), protocol=5)
    pickle.loads(r); pickle.loads(r)
    t1 = time.perf_counter()
    loop(300)
    t2 = time.perf_counter()
    pick.append((t1 - t0) * 1e6); py.append((t2 - t1) * 1e6)
def q(v, p):
    v = sorted(v); return round(v[int(p * (len(v) - 1))], 2)
info["gc_collections"] = [s["collections"] - c for s, c in zip(gc.get_stats(), gcs0)]
info["pickle_us"] = [q(pick, .1), q(pick, .5), q(pick, .9)]
info["pyloop_us"] = [q(py, .1), q(py, .5), q(py, .9)]
# thread CPU of the other threads over 0.5 s of this one sleeping
def thread_cpu():
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f: out[tid] = int(f.read().split()[0])
        except OSError: pass
    return out
a = thread_cpu(); time.sleep(0.5); b = thread_cpu()
info["other_threads_cpu_ms_in_0.5s"] = round(sum(b[t] - a.get(t, 0) for t in b if t != str(os.getpid())) / 1e6, 3)
print(json.dumps(info), flush=True)
