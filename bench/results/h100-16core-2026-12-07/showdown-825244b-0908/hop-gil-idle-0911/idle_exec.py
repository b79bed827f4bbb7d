# The idle CPU of a Python process with torch imported, sleeping 1 s at a time: with no queue ("plain")
# and with a MessageQueue writer and a ReplyGather executor open ("ringcast"). Per-thread schedstat.
# usage: PYTHONPATH=build/python python3 idle_exec.py plain|ringcast [readings]
import os, sys, time, gc
import torch
import ringcast
torch.zeros(1) + 1
def cpu():
    return sum(int(open(f"/proc/self/task/{t}/schedstat").read().split()[0]) for t in os.listdir("/proc/self/task")) / 1e9
def per_thread():
    return {t: int(open(f"/proc/self/task/{t}/schedstat").read().split()[0]) for t in os.listdir("/proc/self/task")}
mode = sys.argv[1]
objs = []
if mode == "ringcast":
    mq = ringcast.MessageQueue(2, 2, max_chunk_bytes=1 << 20, max_chunks=16)
    g = ringcast.ReplyGather(2)
    objs = [mq, g]
print(mode, "threads", len(os.listdir("/proc/self/task")))
vals = []
for i in range(int(sys.argv[2]) if len(sys.argv) > 2 else 8):
    time.sleep(0.01)
    a = per_thread(); t0 = time.perf_counter()
    time.sleep(1.0)
    b = per_thread(); w = time.perf_counter() - t0
    tot = sum(b[t] - a.get(t, 0) for t in b) / 1e9 / w * 100
    vals.append(round(tot, 3))
    if tot > 0.1:
        print("  reading", i, "per thread us:", {t: (b[t]-a.get(t,0))//1000 for t in b})
print(mode, "idle CPU % per second:", vals)
