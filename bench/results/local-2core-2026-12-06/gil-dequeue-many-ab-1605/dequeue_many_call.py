"""One reader's call for a message already in the ring, in one process (no waiting): dequeue_many(64,
timeout=0) and dequeue(timeout=0), ns per call, 5 repeats of 20000 calls (each after an enqueue of the
paced writer's message of bench_gil.py). Usage: PYTHONPATH=<build>/python python3 dequeue_many_call.py"""
import pickle
import statistics as st
import time

import ringcast

q = ringcast.MessageQueue(1, 1, max_chunk_bytes=64 * 1024, max_chunks=4)
r = ringcast.MessageQueue.create_from_handle(q.export_handle(), 0)
msg = {"step": 1, "payload": b"x" * 256}


def bench(fn, n=20000):
    per_repeat = []
    for _ in range(5):
        took = 0
        for _ in range(n):
            q.enqueue(msg)
            t0 = time.perf_counter_ns()
            fn()
            took += time.perf_counter_ns() - t0
        per_repeat.append(took / n)
    return f"median {st.median(per_repeat):.0f} ns ({' '.join(f'{x:.0f}' for x in per_repeat)})"


print("dequeue_many(64, timeout=0):", bench(lambda: r.dequeue_many(64, timeout=0)))
print("dequeue(timeout=0):         ", bench(lambda: r.dequeue(timeout=0)))
blob = pickle.dumps(msg, protocol=5)
t0 = time.perf_counter_ns()
for _ in range(100000):
    pickle.loads(blob)
print(f"pickle.loads of the message alone: {(time.perf_counter_ns() - t0) / 100000:.0f} ns")
