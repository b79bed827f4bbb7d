"""Scratch probe: where does the showdown's enqueue time go? pickle (cold), pickle again (warm), copy+publish."""
import os, sys, time, pickle, statistics, struct
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "bench", "showdown"))
import showdown as sd
import ringcast
from ringcast._queue import dumps_out_of_band
from spin_yield_mq import _LEN

REC = []

def a_broadcast(self, obj):
    q = self.bcast
    t0 = time.perf_counter_ns()
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    t1 = time.perf_counter_ns()
    pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    t2 = time.perf_counter_ns()
    meta = q._meta(q.current_idx); buf = q.buf
    while True:
        written = buf[meta]
        read_count = sum(buf[meta + 1: meta + 1 + q.n_reader])
        if written and read_count != q.n_reader:
            os.sched_yield(); continue
        start = q.current_idx * q.max_chunk_bytes
        buf[start:start + _LEN.size] = _LEN.pack(len(data))
        buf[start + _LEN.size:start + _LEN.size + len(data)] = data
        buf[meta + 1:meta + 1 + q.n_reader] = bytes(q.n_reader)
        buf[meta] = 1
        break
    q.current_idx = (q.current_idx + 1) % q.max_chunks
    t3 = time.perf_counter_ns()
    REC.append((t1 - t0, t2 - t1, t3 - t2))

def c_broadcast(self, obj):
    q = self.bcast
    t0 = time.perf_counter_ns()
    parts = dumps_out_of_band(obj, q._oob_threshold, q._max_parts - 1, q._pickle)
    t1 = time.perf_counter_ns()
    dumps_out_of_band(obj, q._oob_threshold, q._max_parts - 1, q._pickle)
    t2 = time.perf_counter_ns()
    q._writer.send(parts, None)
    t3 = time.perf_counter_ns()
    REC.append((t1 - t0, t2 - t1, t3 - t2))

sd.Baseline.broadcast = a_broadcast
sd.RingcastGather.broadcast = c_broadcast

class CSpin(sd.RingcastGather):
    name = "(c) readers wait=spin"
    options = {"wait": "spin"}
class CFutex(sd.RingcastGather):
    name = "(c) readers wait=futex"
    options = {"wait": "futex"}
sd.TRANSPORTS["s"] = CSpin
sd.TRANSPORTS["f"] = CFutex

def main():
    workers = int(sys.argv[1]); reps = int(sys.argv[2]); variants = sys.argv[3]
    plan, text = sd.plan_pinning("auto", workers)
    if plan:
        sd.PINNING.update(plan); os.sched_setaffinity(0, plan["executor"])
    print("pin:", text)
    work, no_prep = sd.Compute(1e-3), sd.Compute(0)
    res = {v: [] for v in variants}
    for rep in range(reps):
        for v in variants:
            REC.clear()
            r = sd.run_variant(v, workers, 300, work, True, no_prep, 0.2)
            rec = REC[30:330]
            p1 = statistics.median(x[0] for x in rec) / 1e3
            p2 = statistics.median(x[1] for x in rec) / 1e3
            s = statistics.median(x[2] for x in rec) / 1e3
            b = r["breakdown_p50_us"]
            print(f"W={workers} rep {rep+1} {r['variant']:<26} ovh {r['overhead_p50_us']:6.1f}  pickle cold {p1:5.1f} warm {p2:5.1f} "
                  f"send {s:5.1f} | enqueue {b['enqueue']:5.1f} last {b['last_worker_has_it']:5.1f} r->c {b['reply_to_collected']:5.1f}", flush=True)

main()
