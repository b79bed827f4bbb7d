import os, sys, time, statistics, ringcast
from ringcast import _core
sys.path.insert(0, "bench/python")
from bench_glue import STEP
W = int(sys.argv[1]); STEPS = int(sys.argv[2]); WORK = 0.001
mq = ringcast.MessageQueue(W, W); g = ringcast.ReplyGather(W)
h, gh = mq.export_handle(), g.export_handle()
pids = []
for r in range(W):
    pid = os.fork()
    if pid == 0:
        q = ringcast.MessageQueue.create_from_handle(h, r); w = ringcast.ReplyGather.create_from_handle(gh, r)
        while True:
            m = q.dequeue()
            if m is None: os._exit(0)
            e = time.perf_counter() + WORK
            while time.perf_counter() < e: pass
            w.reply(m["step"], (m["step"], r))
    pids.append(pid)
mq.wait_until_ready()
I = {n: i for i, n in enumerate(_core._STAMP_NAMES)}
_core._stamps_enable(True)
A, B, C, D = [], [], [], []
req = dict(STEP)
for s in range(1, STEPS + 1):
    req["step"] = s
    mq.enqueue(req)
    g.collect(s)
    st = _core._stamps_take()
    A.append(st[I["collect_enter"]] - st[I["send_committed"]])
    B.append(st[I["collect_prewait"]] - st[I["collect_enter"]])
    C.append(st[I["collect_attempt"]] - st[I["collect_prewait"]])
    D.append(st[I["send_committed"]] - st[I["send_enter"]])
mq.enqueue(None)
for p in pids: os.waitpid(p, 0)
m = lambda v: statistics.median(v[50:]) / 1000
print(f"W={W}: enqueue {m(D):.2f} | publish->collect entry {m(A):.2f} | entry->pre-wait {m(B):.2f} | pre-wait->first attempt {m(C):.2f} us")
