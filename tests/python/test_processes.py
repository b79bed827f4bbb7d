"""Cross-process: executor-style broadcast with fork and spawn workers, huge messages through a small
ring, handles sent to spawned processes, dead peers."""
import multiprocessing as mp
import os
import signal
import time

import pytest

import ringcast
from _workers import (attach_and_sleep, mixed_object, mixed_reader, np, pattern, sized_reader,
                      writer_then_sleep)

MIXED_COUNT = 10_000


def collect(results, procs, timeout):
    out = []
    deadline = time.monotonic() + timeout
    for _ in procs:
        out.append(results.get(timeout=max(1.0, deadline - time.monotonic())))
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0, f"worker exit code {p.exitcode}"
    for rank, status, detail in out:
        assert status == "ok", f"rank {rank}:\n{detail}"
    return out


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_executor_broadcast_1_to_3(method):
    ctx = mp.get_context(method)
    q = ringcast.MessageQueue(3, 3, local_reader_ranks=[1, 2, 3], max_chunk_bytes=64 * 1024, max_chunks=8)
    results = ctx.Queue()
    procs = [ctx.Process(target=mixed_reader, args=(q.export_handle(), rank, MIXED_COUNT, results))
             for rank in (1, 2, 3)]
    try:
        for p in procs:
            p.start()
        q.wait_until_ready(timeout=60)
        for i in range(MIXED_COUNT):
            q.enqueue(mixed_object(i), timeout=60)
        q.shutdown()  # readers drain, then see ClosedError (they check it)
        collect(results, procs, timeout=120)
    finally:
        q.shutdown()
        for p in procs:
            if p.is_alive():
                p.kill()


def test_sizes_up_to_64_MiB_through_a_1_MiB_ring():
    ctx = mp.get_context("spawn")
    q = ringcast.MessageQueue(2, 2, max_chunk_bytes=128 * 1024, max_chunks=8)
    assert q._writer.capacity == 1 << 20
    sizes = [(0, False), (1, False), (4095, False), (4096, False), (256 * 1024 - 16, False),
             (256 * 1024, True), (1 << 20, False), (3 * (1 << 20) + 5, True), (64 << 20, False), (64 << 20, True)]
    if np is None:
        sizes = [(n, False) for n, _ in sizes]
    results = ctx.Queue()
    procs = [ctx.Process(target=sized_reader, args=(q.export_handle(), r, sizes, results)) for r in (0, 1)]
    try:
        for p in procs:
            p.start()
        q.wait_until_ready(timeout=60)
        for i, (n, as_array) in enumerate(sizes):
            payload = pattern(n, i)
            q.enqueue(np.frombuffer(payload, dtype=np.uint8) if as_array else payload, timeout=120)
        collect(results, procs, timeout=180)
    finally:
        q.shutdown()
        for p in procs:
            if p.is_alive():
                p.kill()


def test_dead_reader_is_named():
    ctx = mp.get_context("fork")
    q = ringcast.MessageQueue(1, 1, max_chunk_bytes=16 * 1024, max_chunks=4, liveness_interval=0.1)
    ready = ctx.Queue()
    p = ctx.Process(target=attach_and_sleep, args=(q.export_handle(), 0, ready))
    p.start()
    try:
        pid = ready.get(timeout=30)
        os.kill(pid, signal.SIGKILL)
        p.join(timeout=10)
        t0 = time.monotonic()
        with pytest.raises(ringcast.PeerDeadError, match=f"pid {pid}"):
            for _ in range(1000):
                q.enqueue(b"d" * 8000, timeout=10)
        assert time.monotonic() - t0 < 5
    finally:
        q.shutdown()
        if p.is_alive():
            p.kill()


def test_dead_writer_is_named():
    ctx = mp.get_context("spawn")  # the handle crosses a pipe to us from a spawned writer
    parent, child = ctx.Pipe()
    p = ctx.Process(target=writer_then_sleep, args=(child, 0.1))
    p.start()
    handle = None
    try:
        handle = parent.recv()
        r = ringcast.MessageQueue.create_from_handle(handle, 0)
        r.wait_until_ready()
        p.kill()
        p.join(timeout=10)
        t0 = time.monotonic()
        with pytest.raises(ringcast.PeerDeadError, match=f"pid {p.pid}"):
            r.dequeue(timeout=10)
        assert time.monotonic() - t0 < 5
        with pytest.raises(ringcast.PeerDeadError):
            r.wait_until_ready()
    finally:
        if p.is_alive():
            p.kill()
        if handle is not None:
            ringcast._core.remove_segment(handle.name)  # a killed writer cannot unlink its segment


@pytest.mark.parametrize("timeout_fraction", [0.0, 0.2, 1.0])
def test_a_reader_polling_with_short_timeouts_learns_the_writer_died(timeout_fraction):
    # Executors poll with short timeouts to stay responsive; the liveness check is counted across
    # calls, so every timeout pattern learns of a dead writer within two liveness intervals.
    liveness = 0.2
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    p = ctx.Process(target=writer_then_sleep, args=(child, liveness))
    p.start()
    handle = None
    try:
        handle = parent.recv()
        r = ringcast.MessageQueue.create_from_handle(handle, 0)
        r.wait_until_ready()
        p.kill()
        p.join(timeout=10)
        dead_at = time.monotonic()
        with pytest.raises(ringcast.PeerDeadError, match=f"pid {p.pid}"):
            while time.monotonic() - dead_at < 20 * liveness:
                try:
                    r.dequeue(timeout=liveness * timeout_fraction)
                except TimeoutError:
                    pass
        took = time.monotonic() - dead_at
        assert took <= 2 * liveness + 0.1, f"learned of the death after {took:.3f} s (liveness {liveness} s)"
    finally:
        if p.is_alive():
            p.kill()
        p.join(timeout=10)
        if handle is not None:
            ringcast._core.remove_segment(handle.name)  # a killed writer cannot unlink its segment
