"""The async step's tail: collect_async before a busy preparation, result() after it, one worker process
replying at once; p50 of result()'s time (the replies are in) and of collect_async's."""
import os, statistics, sys, time
import ringcast
W = int(sys.argv[1]); PREP_US = 2000; N = 1500
g = ringcast.ReplyGather(W); q = ringcast.MessageQueue(1, 1)
gh, qh = g.export_handle(), q.export_handle()
pid = os.fork()
if pid == 0:
    ws = [ringcast.ReplyGather.create_from_handle(gh, r) for r in range(W)]
    r = ringcast.MessageQueue.create_from_handle(qh, 0)
    while (tag := r.dequeue()) >= 0:
        for w in ws:
            w.reply(tag, (tag, 0.001, 0))
    os._exit(0)
q.wait_until_ready(10)
def busy(us):
    end = time.perf_counter_ns() + us * 1000
    while time.perf_counter_ns() < end:
        pass
start_t, result_t = [], []
for tag in range(N):
    q.enqueue(tag)
    t0 = time.perf_counter_ns(); p = g.collect_async(tag, timeout=5); t1 = time.perf_counter_ns()
    busy(PREP_US)
    t2 = time.perf_counter_ns(); p.result(); t3 = time.perf_counter_ns()
    if tag >= 100:
        start_t.append(t1 - t0); result_t.append(t3 - t2)
q.enqueue(-1); os.waitpid(pid, 0)
print(f"W={W} collect_async {statistics.median(start_t)/1e3:.2f} us, result() {statistics.median(result_t)/1e3:.2f} us")
