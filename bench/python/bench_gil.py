#!/usr/bin/env python3
"""How much a waiting ringcast reader costs the rest of the interpreter.

The main thread runs a pure-Python loop for --seconds; stretch = its wall time / its own CPU time
(1.00: it never waited for the GIL; every 1% over 1.00 is time lost to waiting threads or the OS).
Scenarios: solo; T = 1, 2 threads blocked in dequeue (idle queue); T = 2 threads dequeuing from a writer
process that sends every 1 ms; T = 2 threads that only sleep 1 ms in a loop (no queue at all: what any
thread costs that must run Python every millisecond); T = 2 threads that sleep 1 ms in a loop and
then unpickle every message a 1 ms writer would have sent them by then (no queue: the floor under the
paced readers, which must take the GIL and unpickle the same messages); T = 2 threads blocked in
os.read on a pipe each, to which a writer process sends the same pickled message every 1 ms (no
ringcast: any transport that wakes both readers with one message, both then wanting the GIL at once);
and, for contrast, T = 2 threads polling in Python with sched_yield (the spin-and-yield wait of today's
popular shared-memory queue). Each waiting thread's own CPU% is reported.
Medians over --runs runs. Usage: PYTHONPATH=<build>/python python3 bench/python/bench_gil.py
"""
import argparse
import json
import multiprocessing as mp
import os
import pickle
import platform
import statistics
import struct
import threading
import time

import ringcast


def main_loop(seconds):
    wall0, cpu0 = time.perf_counter(), time.thread_time()
    n = 0
    end = wall0 + seconds
    while time.perf_counter() < end:
        for _ in range(1000):
            n += 1
    wall, cpu = time.perf_counter() - wall0, time.thread_time() - cpu0
    return wall / cpu, n / wall


def paced_message(i):
    return {"step": i, "payload": b"x" * 256}


def paced(send, period_s, stop_after_s):
    """Calls send(i) for i = 0, 1, ... every period_s on the clock (not period_s after each send) for
    stop_after_s: both writers' rhythm."""
    end = time.monotonic() + stop_after_s
    nxt = time.monotonic()
    i = 0
    while time.monotonic() < end:
        send(i)
        i += 1
        nxt += period_s
        delay = nxt - time.monotonic()
        if delay > 0:
            time.sleep(delay)


def paced_writer(handle_conn, period_s, stop_after_s, queue_kwargs):
    q = ringcast.MessageQueue(2, 2, max_chunk_bytes=64 * 1024, max_chunks=4, **queue_kwargs)
    handle_conn.send(q.export_handle())
    q.wait_until_ready(timeout=30)
    handle_conn.recv()  # go
    paced(lambda i: q.enqueue(paced_message(i)), period_s, stop_after_s)
    q.shutdown()


def pipe_writer(write_fds, period_s, stop_after_s):
    """The paced writer's messages, framed by length, to one pipe per reader: no ringcast."""
    def send(i):
        blob = pickle.dumps(paced_message(i), protocol=pickle.HIGHEST_PROTOCOL)
        frame = struct.pack("<I", len(blob)) + blob
        for fd in write_fds:
            os.write(fd, frame)

    paced(send, period_s, stop_after_s)


def read_frames(fd, pending):
    """Blocks in os.read (the GIL released) until bytes come; returns the whole frames, keeps the rest.
    None at end of file."""
    chunk = os.read(fd, 1 << 16)
    if not chunk:
        return None
    pending += chunk
    frames = []
    at = 0
    while len(pending) - at >= 4:
        (n,) = struct.unpack_from("<I", pending, at)
        if len(pending) - at - 4 < n:
            break
        frames.append(bytes(pending[at + 4:at + 4 + n]))
        at += 4 + n
    del pending[:at]
    return frames


def run_scenario(kind, threads, seconds, queue_kwargs=None):
    """Returns (stretch, main rate, [waiter CPU%])."""
    stop = threading.Event()
    cpu_pct = []
    lock = threading.Lock()
    writer_proc = None
    readers = []
    if kind == "idle":
        q = ringcast.MessageQueue(threads, threads, max_chunk_bytes=64 * 1024, max_chunks=4)
        readers = [ringcast.MessageQueue.create_from_handle(q.export_handle(), r) for r in range(threads)]
    elif kind == "paced":
        ctx = mp.get_context("fork")
        parent, child = ctx.Pipe()
        writer_proc = ctx.Process(target=paced_writer, args=(child, 0.001, seconds + 5, queue_kwargs or {}))
        writer_proc.start()
        handle = parent.recv()
        readers = [ringcast.MessageQueue.create_from_handle(handle, r) for r in range(threads)]
    elif kind == "pipes":
        pipes = [os.pipe() for _ in range(threads)]
        ctx = mp.get_context("fork")
        writer_proc = ctx.Process(target=pipe_writer, args=([w for _, w in pipes], 0.001, seconds + 5))
        writer_proc.start()
        for _, w in pipes:
            os.close(w)  # the writer's end: the readers see end of file once it is gone
        readers = [r for r, _ in pipes]

    blob = pickle.dumps(paced_message(0), protocol=pickle.HIGHEST_PROTOCOL)

    def waiter(r):
        w0, c0 = time.perf_counter(), time.thread_time()
        got = 0
        pending = bytearray()  # pipes: bytes of a frame not yet whole
        while not stop.is_set():
            if kind == "pyspin":  # today's baseline: poll a flag in Python, sched_yield between polls
                os.sched_yield()
                continue
            if kind == "sleep":  # no queue: a thread that must run Python once per 1 ms, and nothing else
                time.sleep(0.001)
                got += 1
                continue
            if kind == "sleepwork":  # no queue: the readers' Python work on the messages of 1 ms steps
                time.sleep(0.001)
                due = int((time.perf_counter() - w0) / 0.001) - got
                for _ in range(due):
                    pickle.loads(blob)
                got += max(due, 0)
                continue
            if kind == "pipes":  # no ringcast: a blocking read, then the same unpickling
                frames = read_frames(r, pending)
                if frames is None:
                    break
                got += len([pickle.loads(f) for f in frames])
                continue
            try:
                got += len(r.dequeue_many(64, timeout=0.5))
            except TimeoutError:
                pass
            except ringcast.ClosedError:
                break
        with lock:
            cpu_pct.append(100.0 * (time.thread_time() - c0) / (time.perf_counter() - w0))

    ts = [threading.Thread(target=waiter, args=(readers[i] if readers else None,)) for i in range(threads)]
    for t in ts:
        t.start()
    if kind == "paced":
        for r in readers:
            r.wait_until_ready()
        parent.send("go")
    time.sleep(0.1)  # waiters settle into their wait
    stretch, rate = main_loop(seconds)
    stop.set()
    if kind == "pipes":
        writer_proc.kill()  # end of file wakes the readers blocked in os.read
        writer_proc.join()
    else:
        for r in readers:
            r.shutdown()  # wakes a waiter blocked in dequeue
    for t in ts:
        t.join()
    if kind == "idle":
        q.shutdown()
    if kind == "pipes":
        for r in readers:
            os.close(r)
    elif writer_proc is not None:
        writer_proc.kill()
        writer_proc.join()
        ringcast._core.remove_segment(handle.name)
    return stretch, rate, cpu_pct


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--scenarios", default="solo,idle,paced,sleep,sleepwork,pipes,pyspin",
                    help="comma-separated subset of the scenarios (solo is always run first: the rate's base)")
    ap.add_argument("--queue-kwargs", default="{}",
                    help="JSON: MessageQueue options of the paced writer, e.g. '{\"wake_ahead\": false}'")
    args = ap.parse_args()
    queue_kwargs = json.loads(args.queue_kwargs)
    wanted = set(args.scenarios.split(","))
    scenarios = [(k, t) for k, t in [("solo", 0), ("idle", 1), ("idle", 2), ("paced", 2), ("sleep", 2), ("sleepwork", 2),
                                     ("pipes", 2), ("pyspin", 2)] if k == "solo" or k in wanted]
    labels = {"solo": "no other thread", "idle": "T={t} blocked in dequeue (idle)",
              "paced": "T={t} in dequeue, writer process every 1 ms",
              "sleep": "T={t} woken every 1 ms by time.sleep (no queue: the interpreter's floor)",
              "sleepwork": "T={t} woken every 1 ms by time.sleep, unpickling the messages a 1 ms writer sent (no queue: "
                           "the floor under the readers)",
              "pipes": "T={t} blocked in os.read on a pipe each, a writer process sending the same messages every 1 ms "
                       "(no ringcast: both readers woken by one message)",
              "pyspin": "T={t} Python sched_yield pollers (baseline)"}
    print(f"# bench_gil: {platform.node()} {os.cpu_count()} cpus, Python {platform.python_version()}, "
          f"{time.strftime('%Y-%m-%d %H:%M')}, {args.runs} runs x {args.seconds} s, medians"
          + (f"; paced writer's options {queue_kwargs}" if queue_kwargs else ""))
    print("| main thread beside | stretch (wall/CPU) | loop rate vs solo | waiter CPU% each |")
    print("|---|---|---|---|")
    solo_rate = None
    for kind, t in scenarios:
        res = [run_scenario(kind, t, args.seconds, queue_kwargs) for _ in range(args.runs)]
        stretch = statistics.median(r[0] for r in res)
        rate = statistics.median(r[1] for r in res)
        if solo_rate is None:
            solo_rate = rate
        cpus = [c for r in res for c in r[2]]
        cpu = f"{statistics.median(cpus):.2f}" if cpus else "-"
        print(f"| {labels[kind].format(t=t)} | {stretch:.3f} | {rate / solo_rate:.3f} | {cpu} |", flush=True)


if __name__ == "__main__":
    main()
