"""A reader's CPU under bursty traffic: the writer sends bursts of B messages (back to back, or S ms apart), then pauses
P ms; the reader takes every message with dequeue(). Prints the reader's CPU % over the run (its whole
process, schedstat) and how many messages it got. Used for an A/B of the spin budget (the experiment
switch RINGCAST_EXP_KEEP_SPIN=4 in the reader's environment)."""
import os, random, sys, time, multiprocessing as mp
import ringcast

BURST, PAUSE_MS, BURSTS = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
SPACING_MS = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0  # between the messages of a burst

def cpu_s():
    return sum(int(open(f"/proc/self/task/{t}/schedstat").read().split()[0]) for t in os.listdir("/proc/self/task")) / 1e9

def writer(conn):
    q = ringcast.MessageQueue(1, 1, max_chunk_bytes=64 * 1024, max_chunks=8)
    conn.send(q.export_handle())
    q.wait_until_ready(timeout=30)
    conn.recv()
    msg = {"x": b"y" * 256}
    for _ in range(BURSTS):
        for i in range(BURST):
            if i and SPACING_MS:
                time.sleep(SPACING_MS / 1000)
            q.enqueue(msg)
        time.sleep(random.uniform(0.1, 1.9) * PAUSE_MS / 1000)  # irregular: no rhythm to predict
    q.enqueue(None)
    conn.recv()
    q.shutdown()

if __name__ == "__main__":
    ctx = mp.get_context("fork")
    a, b = ctx.Pipe()
    p = ctx.Process(target=writer, args=(b,))
    p.start()
    h = a.recv()
    r = ringcast.MessageQueue.create_from_handle(h, 0)
    r.wait_until_ready()
    a.send("go")
    c0, t0 = cpu_s(), time.perf_counter()
    n = 0
    while r.dequeue() is not None:
        n += 1
    c1, t1 = cpu_s(), time.perf_counter()
    a.send("done")
    p.join()
    print(f"mode={os.environ.get('RINGCAST_EXP_KEEP_SPIN','0')} burst={BURST} spacing={SPACING_MS}ms pause={PAUSE_MS}ms got={n} wall={t1-t0:.2f}s reader_cpu={100*(c1-c0)/(t1-t0):.2f}%")
