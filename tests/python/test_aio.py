"""ringcast.aio: awaitable dequeue / enqueue / collect on the event loop's own fd watching (no threads).

Writers run in real processes (fork); the consumer is one asyncio loop (default, and uvloop when
python3-uvloop is installed).
"""
import asyncio
import os
import pickle
import random
import signal
import threading
import time

import pytest

import ringcast
import ringcast.aio as aio

try:
    import uvloop
except ImportError:  # the uvloop cases skip, saying so
    uvloop = None

LOOPS = ["default", pytest.param("uvloop", marks=pytest.mark.skipif(uvloop is None, reason="uvloop not installed"))]
N_MESSAGES = 10_000


def run(loop_kind, coro):
    if loop_kind == "uvloop":
        loop = uvloop.new_event_loop()
    else:
        loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.close()


QUEUE_KW = dict(max_chunk_bytes=4096, max_chunks=8)


def spawn_writer(body):
    """Child process: creates a queue (writer; 1 reader rank), hands its handle to this process,
    waits for the reader, runs body(q), shuts down. Returns (pid, the reader MessageQueue here).
    Endpoints never cross a fork: each process makes its own from the handle."""
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.close(rfd)
            q = ringcast.MessageQueue(1, 1, **QUEUE_KW)
            os.write(wfd, pickle.dumps(q.export_handle()))
            os.close(wfd)
            q.wait_until_ready(timeout=30)
            body(q)
            q.shutdown()
        except BaseException as e:  # noqa: BLE001 - report anything, then exit non-zero
            print(f"writer child: {e!r}", flush=True)
            code = 1
        os._exit(code)
    os.close(wfd)
    data = b""
    while chunk := os.read(rfd, 65536):
        data += chunk
    os.close(rfd)
    return pid, ringcast.MessageQueue.create_from_handle(pickle.loads(data), 0)


def fork_writer(count, pause_every=0):
    """A writer process enqueueing (i, payload) for i in range(count), pausing now and then so the
    consumer sleeps."""
    def body(q):
        for i in range(count):
            if pause_every and i % pause_every == 0:
                time.sleep(0.0005)
            q.enqueue((i, b"x" * (i % 97)), timeout=30)
    return spawn_writer(body)


def reap(pid, limit=60.0):
    end = time.monotonic() + limit
    while time.monotonic() < end:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return -1000


@pytest.mark.parametrize("loop_kind", LOOPS)
def test_two_queues_with_random_cancellation_lose_and_duplicate_nothing(loop_kind):
    """An asyncio consumer of 2 queues, each fed 10,000 messages by its own writer process; awaits are
    cancelled at random points. Every message arrives once, in order, with its content."""
    pids, readers = zip(*(fork_writer(N_MESSAGES, pause_every=500) for _ in range(2)))
    rng = random.Random(12)
    cancelled = [0]

    async def consume(reader):
        expect = 0
        while expect < N_MESSAGES:
            task = asyncio.ensure_future(aio.dequeue(reader, timeout=20))
            if rng.random() < 0.3:  # cancel at a random point: before it ran, while it waits, or later
                for _ in range(rng.randrange(3)):
                    await asyncio.sleep(0)
                task.cancel()
            try:
                seq, payload = await task
            except asyncio.CancelledError:
                cancelled[0] += 1
                continue
            assert seq == expect, f"got {seq}, expected {expect}"
            assert payload == b"x" * (seq % 97)
            expect += 1
        return expect

    async def main():
        return await asyncio.gather(*(consume(r) for r in readers))

    assert run(loop_kind, main()) == [N_MESSAGES, N_MESSAGES]
    assert cancelled[0] > 100, "too few cancellations: the test tests little"
    for pid in pids:
        assert reap(pid) == 0
    for r in readers:
        r.shutdown()


@pytest.mark.parametrize("loop_kind", LOOPS)
def test_dequeue_never_blocks_the_loop(loop_kind):
    """While dequeue awaits an idle queue the loop keeps running other callbacks (a ticker), and the
    message published later by another process arrives through the fd."""
    ticks = [0]

    async def ticker(stop):
        while not stop.is_set():
            ticks[0] += 1
            await asyncio.sleep(0.005)

    async def main():
        stop = asyncio.Event()
        t = asyncio.ensure_future(ticker(stop))
        t0 = time.monotonic()
        got = await aio.dequeue(r, timeout=10)
        waited = time.monotonic() - t0
        stop.set()
        await t
        return got, waited, pid

    pid, r = spawn_writer(lambda q: (time.sleep(0.5), q.enqueue("late", timeout=10)))
    got, waited, _ = run(loop_kind, main())
    assert got == "late"
    assert 0.1 < waited < 5  # (the writer's 0.5 s began at its fork, before the loop started)
    assert ticks[0] > 20, f"the loop was blocked ({ticks[0]} ticks in {waited:.2f} s)"
    assert reap(pid) == 0
    r.shutdown()


@pytest.mark.parametrize("loop_kind", LOOPS)
def test_dequeue_times_out(loop_kind):
    pid, r = spawn_writer(lambda q: time.sleep(0.2))

    async def main():
        t0 = time.monotonic()
        with pytest.raises(TimeoutError):
            await aio.dequeue(r, timeout=0.05)
        return time.monotonic() - t0

    assert 0.04 < run(loop_kind, main()) < 2
    assert reap(pid) == 0
    r.shutdown()


@pytest.mark.parametrize("loop_kind", LOOPS)
def test_writer_in_the_loop_waits_for_space(loop_kind):
    """enqueue awaits room (the ring holds ~8 messages) while a reader process drains slowly; the loop
    stays free, and every message arrives in order."""
    q = ringcast.MessageQueue(1, 1, **QUEUE_KW)
    handle = q.export_handle()
    count = 400
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            r = ringcast.MessageQueue.create_from_handle(handle, 0)
            for i in range(count):
                seq, payload = r.dequeue(timeout=30)
                assert seq == i and payload == bytes(2000), (seq, i)
                if i % 20 == 0:
                    time.sleep(0.002)
        except BaseException as e:  # noqa: BLE001
            print(f"reader child: {e!r}", flush=True)
            code = 1
        os._exit(code)
    ticks = [0]

    async def main():
        stop = asyncio.Event()

        async def ticker():
            while not stop.is_set():
                ticks[0] += 1
                await asyncio.sleep(0.002)

        t = asyncio.ensure_future(ticker())
        for i in range(count):
            await aio.enqueue(q, (i, bytes(2000)), timeout=30)
        stop.set()
        await t

    run(loop_kind, main())
    assert reap(pid) == 0
    assert ticks[0] > 5
    q.shutdown()


@pytest.mark.parametrize("loop_kind", LOOPS)
def test_collect_awaits_replies_from_worker_processes(loop_kind):
    g = ringcast.ReplyGather(2)
    handle = g.export_handle()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            workers = [ringcast.ReplyGather.create_from_handle(handle, rank) for rank in range(2)]
            for tag in range(50):
                for rank, w in enumerate(workers):
                    time.sleep(0.001)
                    w.reply(tag, ("reply", tag, rank))
        except BaseException as e:  # noqa: BLE001
            print(f"worker child: {e!r}", flush=True)
            code = 1
        os._exit(code)

    async def main():
        out = []
        for tag in range(50):
            out.append(await aio.collect(g, tag, timeout=20))
        return out

    replies = run(loop_kind, main())
    for tag, got in enumerate(replies):
        assert list(got) == [("reply", tag, 0), ("reply", tag, 1)]
    assert reap(pid) == 0
    g.close()


def test_the_loop_thread_is_the_only_thread():
    """No helper thread is started: the awaits run on the loop's fd watching alone."""
    pid, r = fork_writer(100)
    before = threading.active_count()

    async def main():
        for i in range(100):
            assert (await aio.dequeue(r, timeout=10))[0] == i
        return threading.active_count()

    assert run("default", main()) == before
    assert reap(pid) == 0
    r.shutdown()


@pytest.mark.parametrize("loop_kind", LOOPS)
def test_the_documented_example_runs(loop_kind):
    """examples/events_aio.py (shown in docs/events.md) does what it says."""
    import subprocess
    import sys
    example = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "events_aio.py")
    args = [sys.executable, example] + (["--uvloop"] if loop_kind == "uvloop" else [])
    out = subprocess.run(args, capture_output=True, text=True, timeout=60, env=os.environ)
    assert out.returncode == 0, out.stderr
    assert "('queue 0', 1000), ('queue 1', 1000)" in out.stdout, out.stdout
