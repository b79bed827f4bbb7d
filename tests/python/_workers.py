"""Worker functions for multiprocessing (spawn needs them importable by module name) and the
deterministic message generators both sides use to check order and content."""
import os
import signal
import time
import traceback

try:
    import numpy as np
except ImportError:  # numpy is optional: the mixed stream then has no arrays
    np = None

import ringcast


def refused_in_a_forked_child(call):
    """Runs ``call()`` in a fork()ed child; True when it raised the RingcastError that refuses an endpoint's
    copy ("... belongs to pid P; this process (pid C) has a copy of it through fork()": the rule every
    endpoint keeps), False when it returned or raised otherwise."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            try:
                call()
            except ringcast.RingcastError as e:
                if "has a copy of it through fork()" in str(e):
                    code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


class EnqueuesWhilePickled:
    """Pickling it enqueues `inner` on `queue` first (a __reduce__ that sends: nested pickling)."""

    def __init__(self, queue, inner):
        self.queue, self.inner = queue, inner

    def __reduce__(self):
        self.queue.enqueue(self.inner, timeout=5)
        return (str, ("outer",))


def mixed_object(i):
    """Message i of the executor-style stream: dicts, lists, strings, bytes, numpy arrays."""
    k = i % 6
    if k == 0:
        return {"step": i, "req": [f"r{i}-{j}" for j in range(i % 7)], "flag": i % 2 == 0}
    if k == 1:
        return [i, float(i) / 3, None, ("t", i)]
    if k == 2:
        return "s" * (i % 300) + str(i)
    if k == 3:
        return bytes((i + j) % 256 for j in range(i % 9000))
    if k == 4 and np is not None:
        return np.arange(i % 5000, dtype=np.float32) * i
    return {"seq": i, "blob": bytearray(b"%d" % i) * (i % 2000)}


def same(a, b):
    if np is not None and isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape and bool((a == b).all())
    return type(a) is type(b) and a == b


def pattern(n, seed):
    """n deterministic bytes (numpy-fast when available)."""
    if np is not None:
        period = ((np.arange(251, dtype=np.uint32) * 7 + seed) % 251).astype(np.uint8)  # period 251
        return np.resize(period, n).tobytes()
    return bytes((j * 7 + seed) % 251 for j in range(n))


def mixed_reader(handle, rank, count, results):
    try:
        q = ringcast.MessageQueue.create_from_handle(handle, rank)
        q.wait_until_ready()
        for i in range(count):
            got = q.dequeue(timeout=60)
            if not same(got, mixed_object(i)):
                raise AssertionError(f"rank {rank}: message {i} differs: {got!r:.200}")
        try:
            q.dequeue(timeout=60)
            raise AssertionError("expected ClosedError after the last message")
        except ringcast.ClosedError:
            pass
        results.put((rank, "ok", count))
    except BaseException:
        results.put((rank, "error", traceback.format_exc()))


def sized_reader(handle, rank, sizes, results):
    try:
        q = ringcast.MessageQueue.create_from_handle(handle, rank)
        for i, (n, as_array) in enumerate(sizes):
            got = q.dequeue(timeout=120)
            want = pattern(n, i)
            if as_array and np is not None:
                ok = isinstance(got, np.ndarray) and got.nbytes == n and got.tobytes() == want
            else:
                ok = isinstance(got, bytes) and got == want
            if not ok:
                raise AssertionError(f"rank {rank}: message {i} ({n} bytes) differs")
        results.put((rank, "ok", len(sizes)))
    except BaseException:
        results.put((rank, "error", traceback.format_exc()))


def attach_and_sleep(handle, rank, ready):
    q = ringcast.MessageQueue.create_from_handle(handle, rank)
    ready.put(os.getpid())
    time.sleep(600)
    del q


def writer_then_sleep(conn, liveness):
    q = ringcast.MessageQueue(1, 1, max_chunk_bytes=16 * 1024, max_chunks=4, liveness_interval=liveness)
    conn.send(q.export_handle())
    time.sleep(600)


# ---- ReplyGather workers ------------------------------------------------------------------------------

def gather_worker(handle, rank, steps, start_tag):
    """Replies to tags start_tag..start_tag+steps-1 with (rank, tag, payload)."""
    import time
    g = ringcast.ReplyGather.create_from_handle(handle, rank)
    for i in range(steps):
        tag = start_tag + i
        if (tag + rank) % 7 == 0:
            time.sleep(0.0005 * rank)  # ranks finish in varying order
        g.reply(tag, {"rank": rank, "tag": tag, "payload": pattern(100 + 37 * rank, tag)}, timeout=30)
    g.close()


def gather_worker_dies(handle, rank):
    g = ringcast.ReplyGather.create_from_handle(handle, rank)  # noqa: F841 — attached, then killed
    os.kill(os.getpid(), signal.SIGKILL)


def idle_cpu_reader(handle, burst, results):
    """Reads a burst of back-to-back messages (short waits: the adaptive spin learns to spin), then
    reports the CPU time its wait for the next message burnt — a wait the writer makes ~1 s long."""
    q = ringcast.MessageQueue.create_from_handle(handle, 0)
    q.wait_until_ready(timeout=30)
    for _ in range(burst):
        q.dequeue(timeout=30)
    cpu0, wall0 = time.process_time(), time.monotonic()
    q.dequeue(timeout=30)
    results.put((time.process_time() - cpu0, time.monotonic() - wall0))


def gather_replies_after_executor_closed(handle, attached, closed, n, size):
    """Attaches, says so, waits for the executor's close, then replies n times (size bytes each, 5 s
    timeout each): exit code 0 when every reply went through, 3 on the first TimeoutError."""
    g = ringcast.ReplyGather.create_from_handle(handle, 0)
    attached.set()
    closed.wait(30)
    for i in range(n):
        try:
            g.reply(i, b"x" * size, timeout=5)
        except TimeoutError:
            os._exit(3)
    g.close()


def gather_attach_unless(handle, rank, fail_rank):
    """Attaches as `rank` and closes, unless rank == fail_rank: that one fails before it attaches."""
    if rank == fail_rank:
        raise SystemExit(5)
    ringcast.ReplyGather.create_from_handle(handle, rank).close()
