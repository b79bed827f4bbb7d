"""ringcast.aio: awaitable dequeue / enqueue / collect on the event loop's own fd watching (no threads).

Writers run in real processes (fork); the consumer is one asyncio loop (default, and uvloop when
python3-uvloop is installed).
"""
import asyncio
import concurrent.futures
import gc
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


# ---- the methods, large messages without a thread, the awaitable pending collect --------------------
# QUEUE_KW gives a 64 KiB ring whose largest record is 16 KiB - 16: LARGE messages span 2..13 records
# and up to three times the ring, so they cannot be published without waiting for the reader between
# their records, and a cancellation can land between any two records on either side.
N_LARGE_STREAM = 1500


def stream_item(seq):
    """Message `seq` of the large-message stream: every 4th one 20..200 KB, the others small; the
    content depends on seq, so a torn, lost or duplicated message cannot pass for another."""
    size = random.Random(seq).randrange(20_000, 200_000) if seq % 4 == 0 else seq % 97
    return seq, (seq.to_bytes(4, "little") * (size // 4 + 1))[:size]


async def cancel_sometimes(rng, coro, counter):
    """Runs `coro` as a task, cancelling it at a random point 30 % of the time (before it ran, while
    it waits, between the records of a large message). Returns (True, value) or (False, None)."""
    task = asyncio.ensure_future(coro)
    if rng.random() < 0.3:
        for _ in range(rng.randrange(4)):
            await asyncio.sleep(0)
        task.cancel()
    try:
        return True, await task
    except asyncio.CancelledError:
        counter[0] += 1
        return False, None


def async_stream_writer(loop_kind, count, seed):
    """Body for spawn_writer: enqueue_async of the stream on an asyncio loop, with random cancellations;
    a cancelled message is withdrawn, so it is sent again."""
    def body(q):
        rng = random.Random(seed)
        cancelled = [0]

        async def main():
            for seq in range(count):
                while not (await cancel_sometimes(rng, q.enqueue_async(stream_item(seq), timeout=30), cancelled))[0]:
                    pass
        run(loop_kind, main())
        assert cancelled[0] > 50, f"writer: only {cancelled[0]} cancellations"
        assert threading.active_count() == 1, "enqueue_async started a thread"
    return body


@pytest.mark.parametrize("loop_kind", LOOPS)
def test_large_messages_cross_on_the_loop_with_cancellations_on_both_sides(loop_kind):
    """A writer process awaits enqueue_async and a reader process awaits dequeue_async, both on asyncio
    loops (no thread), over a stream mixing small messages with ones up to three times the ring; both
    cancel awaits at random points. Every message arrives once, in order, whole: a cancelled enqueue
    withdrew its message (also when some of its records were out), a cancelled dequeue left the records
    it had consumed assembled for the next one."""
    pid, r = spawn_writer(async_stream_writer(loop_kind, N_LARGE_STREAM, seed=5))
    rng = random.Random(7)
    cancelled = [0]

    async def main():
        seq = 0
        while seq < N_LARGE_STREAM:
            ok, got = await cancel_sometimes(rng, r.dequeue_async(timeout=30), cancelled)
            if ok:
                assert got[0] == seq, f"got message {got[0]}, expected {seq}"
                assert got == stream_item(seq), f"message {seq} arrived with other content"
                seq += 1
        with pytest.raises(ringcast.ClosedError):  # the writer shut down: nothing more, nothing torn
            await r.dequeue_async(timeout=30)
        return threading.active_count()

    assert run(loop_kind, main()) == 1, "dequeue_async started a thread"
    assert cancelled[0] > 100, f"reader: only {cancelled[0]} cancellations"
    assert reap(pid) == 0
    r.shutdown()


def test_a_large_message_needs_no_thread_and_the_loop_stays_free():
    """enqueue_async of one message 16 times the ring, read by a slow blocking reader process: the
    loop keeps ticking meanwhile and no thread is started (the default executor is never used)."""
    q = ringcast.MessageQueue(1, 1, **QUEUE_KW)
    handle = q.export_handle()
    big = bytes(range(256)) * 4096  # 1 MiB
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            r = ringcast.MessageQueue.create_from_handle(handle, 0)
            time.sleep(0.2)
            assert r.dequeue(timeout=30) == big
        except BaseException as e:  # noqa: BLE001
            print(f"reader child: {e!r}", flush=True)
            code = 1
        os._exit(code)
    ticks = [0]

    async def main():
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()

        async def ticker():
            while not stop.is_set():
                ticks[0] += 1
                await asyncio.sleep(0.001)

        t = asyncio.ensure_future(ticker())
        q.wait_until_ready(timeout=30)
        await q.enqueue_async(big, timeout=30)
        stop.set()
        await t
        return threading.active_count(), loop._default_executor

    threads, executor = run("default", main())
    assert threads == 1 and executor is None, "a thread (the loop's default executor) was used"
    assert ticks[0] > 20, f"the loop was blocked ({ticks[0]} ticks)"
    assert reap(pid) == 0
    q.shutdown()


def test_enqueue_async_timeout_withdraws_a_part_sent_message():
    """A message larger than the ring times out with some records out (the reader takes them but never
    the end): TimeoutError, and the reader never sees any of it — the next message is the next one."""
    q = ringcast.MessageQueue(1, 1, **QUEUE_KW)
    r = ringcast.MessageQueue.create_from_handle(q.export_handle(), 0)

    async def main():
        with pytest.raises(TimeoutError, match="withdrawn"):
            await q.enqueue_async(bytes(300_000), timeout=0.05)
        with pytest.raises(TimeoutError):  # records of it were out: the reader consumes them, no message
            await r.dequeue_async(timeout=0)
        with pytest.raises(RuntimeError, match="writer"):
            await q.dequeue_async()
        await q.enqueue_async("next", timeout=5)
        assert await r.dequeue_async(timeout=5) == "next"

    run("default", main())
    q.shutdown()


def test_an_enqueue_async_refused_by_a_dead_reader_before_its_first_record_leaves_nothing_pending():
    """A part-sent message timed out (the writer owes its readers an abort record), then the reader
    that blocked it died. The next enqueue_async fails in that abort record's reserve (PeerDeadError:
    the due dead-reader check) and must give its message up: once a reader takes the dead rank's place,
    enqueue and enqueue_async work again (they raised 'an enqueue_async of this queue is in progress'
    for good)."""
    q = ringcast.MessageQueue(1, 1, max_chunk_bytes=4096, max_chunks=4, liveness_interval=0.2)
    h = q.export_handle()
    r_pid = os.fork()
    if r_pid == 0:
        try:
            r = ringcast.MessageQueue.create_from_handle(h, 0)
            time.sleep(60)  # attached, never reads
            del r
        finally:
            os._exit(0)

    async def main():
        q.wait_until_ready(timeout=10)
        with pytest.raises(TimeoutError, match="withdrawn"):
            await q.enqueue_async(bytes(4_000_000), timeout=0.3)
        os.kill(r_pid, signal.SIGKILL)
        os.waitpid(r_pid, 0)
        await asyncio.sleep(0.5)  # past the liveness interval: the next reserve checks the readers
        with pytest.raises(ringcast.PeerDeadError, match="died"):
            await q.enqueue_async(b"lost", timeout=1)
        r = ringcast.MessageQueue.create_from_handle(h, 0)  # the dead rank's replacement, at its head
        got = asyncio.ensure_future(r.dequeue_async(timeout=5))  # drops the withdrawn records on the way
        await q.enqueue_async("after", timeout=5)
        assert await got == "after"
        q.enqueue("and after", timeout=5)
        assert r.dequeue(timeout=5) == "and after"
        r.shutdown()

    run("default", main())
    q.shutdown()


def test_a_pending_enqueue_async_refuses_other_writes():
    q = ringcast.MessageQueue(1, 1, **QUEUE_KW)
    r = ringcast.MessageQueue.create_from_handle(q.export_handle(), 0)

    async def main():
        task = asyncio.ensure_future(q.enqueue_async(bytes(300_000), timeout=10))
        await asyncio.sleep(0.01)  # part of it is out, the rest pending in the writer
        with pytest.raises(RuntimeError, match="enqueue_async of this queue is in progress"):
            q.enqueue("other", timeout=0)
        for _ in range(40):  # the reader drains it on the same loop
            try:
                assert await r.dequeue_async(timeout=0.2) == bytes(300_000)
                break
            except TimeoutError:
                pass
        await task

    run("default", main())
    q.shutdown()


def gather_workers(handle, schedule):
    """Worker process replying on schedule: for (sleep_s, rank, tag) in order, sleep, then reply
    (tag, rank) as that rank."""
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            workers = {}
            for sleep_s, rank, tag in schedule:
                if rank not in workers:
                    workers[rank] = ringcast.ReplyGather.create_from_handle(handle, rank)
                time.sleep(sleep_s)
                workers[rank].reply(tag, ("reply", tag, rank))
            time.sleep(0.5)  # keep the rings until the parent collected
        except BaseException as e:  # noqa: BLE001
            print(f"worker child: {e!r}", flush=True)
            code = 1
        os._exit(code)
    return pid


@pytest.mark.parametrize("loop_kind", LOOPS)
def test_await_collect_async_waits_on_the_loop_without_spinning(loop_kind):
    """``await gather.collect_async(tag, ranks)``: the replies of worker processes, in the order asked.
    While rank 1 is 0.3 s late with tag 1, awaited alone, rank 0's tag-1 reply already waits in its
    ring: the loop is free and the process uses almost no CPU, because the collector is armed for the
    missing rank only (armed for every rank, rank 0's reply would report "ready" on every look and the
    loop would spin)."""
    g = ringcast.ReplyGather(2)
    pid = gather_workers(g.export_handle(), [(0, 0, 0), (0, 1, 0), (0, 0, 1), (0.3, 1, 1), (0, 0, 2), (0, 1, 2)])

    async def main():
        out = [await g.collect_async(0, timeout=20)]
        await asyncio.sleep(0.05)  # rank 0's tag-1 reply is in
        cpu0, t0 = time.process_time(), time.monotonic()
        out.append(await g.collect_async(1, [1], timeout=20))
        cpu, wall = time.process_time() - cpu0, time.monotonic() - t0
        out.append(await g.collect_async(1, [0], timeout=20))
        out.append(await g.collect_async(2, [1, 0], timeout=20))
        return out, cpu, wall

    out, cpu, wall = run(loop_kind, main())
    assert out == [[("reply", 0, 0), ("reply", 0, 1)], [("reply", 1, 1)], [("reply", 1, 0)],
                   [("reply", 2, 1), ("reply", 2, 0)]]
    assert wall > 0.1 and cpu < 0.5 * wall, f"the loop spun: {cpu:.3f} s CPU in {wall:.3f} s"
    assert reap(pid) == 0
    g.close()


@pytest.mark.parametrize("loop_kind", LOOPS)
def test_awaited_collect_async_survives_cancellation_and_times_out(loop_kind):
    """A cancelled await leaves the collect pending with the reply it took; awaiting it again returns
    both replies. The collect's own timeout ends an await with TimeoutError naming the missing ranks."""
    g = ringcast.ReplyGather(2)
    pid = gather_workers(g.export_handle(), [(0, 0, 0), (0.4, 1, 0)])

    async def await_it(pending):
        return await pending

    async def main():
        pending = g.collect_async(0, timeout=20)
        task = asyncio.ensure_future(await_it(pending))
        await asyncio.sleep(0.1)  # rank 0 answered, rank 1 is 0.3 s away
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert not pending.done()
        first = await pending
        t0 = time.monotonic()
        with pytest.raises(TimeoutError, match="rank"):
            await g.collect_async(1, timeout=0.1)  # tag 1 never comes
        return first, time.monotonic() - t0

    first, waited = run(loop_kind, main())
    assert first == [("reply", 0, 0), ("reply", 0, 1)]
    assert 0.09 < waited < 2
    assert reap(pid) == 0
    g.close()


@pytest.mark.parametrize("loop_kind", LOOPS)
def test_a_reader_shut_down_and_dropped_leaves_the_loop_idle(loop_kind):
    """shutdown() signals the reader's eventfd, and the reader's object then goes before the loop runs
    again: the fd the loop watches must still be removable then. (The loop watched the endpoint's own
    fd, closed by then; the writer's copy kept the eventfd open, so epoll kept the registration and,
    the counter signalled, the loop spun at 100 % CPU from then on.)"""
    import resource
    q = ringcast.MessageQueue(1, 1, **QUEUE_KW)
    box = [ringcast.MessageQueue.create_from_handle(q.export_handle(), 0)]

    def cpu_s():
        u = resource.getrusage(resource.RUSAGE_SELF)
        return u.ru_utime + u.ru_stime

    async def main():
        r = box.pop()
        got = asyncio.ensure_future(r.dequeue_async(timeout=5))
        await asyncio.sleep(0.05)  # armed, asleep: the writer signals its eventfd (and keeps a copy)
        q.enqueue("hello", timeout=5)
        assert await got == "hello"
        r.shutdown()  # signals the eventfd (cancel)
        del r
        gc.collect()
        before = cpu_s()
        await asyncio.sleep(0.5)
        return cpu_s() - before

    idle_cpu = run(loop_kind, main())
    q.shutdown()
    assert idle_cpu < 0.1, f"the idle loop burnt {idle_cpu:.2f} s of CPU in 0.5 s"


def test_shutdown_ends_a_pending_enqueue_async_and_a_waiting_dequeue_async():
    """shutdown() of the writer while its enqueue_async waits for room, and of a reader while its
    dequeue_async waits: both awaits raise ClosedError at once (the fd is poked), nothing left pending."""
    q = ringcast.MessageQueue(1, 1, **QUEUE_KW)
    r = ringcast.MessageQueue.create_from_handle(q.export_handle(), 0)
    q2 = ringcast.MessageQueue(1, 1, **QUEUE_KW)
    r2 = ringcast.MessageQueue.create_from_handle(q2.export_handle(), 0)

    async def main():
        sending = asyncio.ensure_future(q.enqueue_async(bytes(300_000)))  # larger than the ring: waits
        waiting = asyncio.ensure_future(r2.dequeue_async())  # nothing comes
        await asyncio.sleep(0.05)
        assert not sending.done() and not waiting.done()
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        q.shutdown()
        r2.shutdown()
        for task in (sending, waiting):
            with pytest.raises(ringcast.ClosedError):
                await asyncio.wait_for(task, 5)
        return loop.time() - t0

    assert run("default", main()) < 1.0
    r.shutdown()
    q2.shutdown()


def test_a_reader_shut_down_while_awaited_wakes_the_await_at_once_and_leaves_nothing_behind():
    """A reader's shutdown() gives its rank back at once, while an event loop watches its wake fd: the
    poke still wakes the await (not the next dead-peer check, 10 s off here), the fd stays open until
    the reader goes (closed, its number could come back as a socket the loop would then not watch), and
    the announcement arm() made is cleared (else every later publish pays a wake syscall)."""
    from ringcast import _core
    q = ringcast.MessageQueue(2, 2, liveness_interval=10, **QUEUE_KW)
    r0 = ringcast.MessageQueue.create_from_handle(q.export_handle(), 0)
    r1 = ringcast.MessageQueue.create_from_handle(q.export_handle(), 1)
    fd = _core.wake_fd(r1._reader)

    async def main():
        waiting = asyncio.ensure_future(r1.dequeue_async())
        await asyncio.sleep(0.05)
        assert not waiting.done()
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        r1.shutdown()
        with pytest.raises(ringcast.ClosedError):
            await asyncio.wait_for(waiting, 5)
        return loop.time() - t0

    assert run("default", main()) < 0.5
    os.fstat(fd)  # still open: the reader object lives
    for _ in range(200):
        q.enqueue(b"x", timeout=1)
        assert r0.dequeue(timeout=1) == b"x"
    assert q._writer.wake_calls == 0
    r0.shutdown()
    q.shutdown()


def fork_child(body):
    """A child process running body(); exits 0, or 1 printing what it raised."""
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            body()
        except BaseException as e:  # noqa: BLE001
            print(f"child: {e!r}", flush=True)
            code = 1
        os._exit(code)
    return pid


def kill_and_reap(pid):
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)


def test_every_await_notices_a_dead_peer_within_its_liveness_interval():
    """A peer that dies never signals the eventfd an await sleeps on: each await checks its peers every
    liveness_interval as a blocking wait does, and raises PeerDeadError instead of waiting forever. A
    worker that replied and then exited does not fail a collect that took its reply."""
    interval = 0.2

    async def timed(coro):
        t0 = time.monotonic()
        with pytest.raises(ringcast.PeerDeadError) as e:
            await coro
        assert time.monotonic() - t0 < 5, "not within a few liveness intervals"
        return str(e.value)

    # dequeue: the writer is killed
    rfd, wfd = os.pipe()

    def writer():
        q = ringcast.MessageQueue(1, 1, liveness_interval=interval, **QUEUE_KW)
        os.write(wfd, pickle.dumps(q.export_handle()))
        time.sleep(60)

    pid = fork_child(writer)
    os.close(wfd)
    handle = pickle.loads(os.read(rfd, 65536))
    os.close(rfd)
    reader = ringcast.MessageQueue.create_from_handle(handle, 0)
    kill_and_reap(pid)
    run("default", timed(aio.dequeue(reader, timeout=30)))
    reader.shutdown()

    # enqueue on a full ring: the reader is killed
    q = ringcast.MessageQueue(1, 1, liveness_interval=interval, **QUEUE_KW)
    pid = fork_child(lambda: (ringcast.MessageQueue.create_from_handle(q.export_handle(), 0), time.sleep(60)))
    q.wait_until_ready(timeout=30)
    kill_and_reap(pid)
    with pytest.raises(TimeoutError):
        while True:
            q.enqueue(bytes(1000), timeout=0)
    assert "reader" in run("default", timed(aio.enqueue(q, bytes(1000), timeout=30)))
    q.shutdown()

    # collect and an awaited collect_async: rank 0 replies and exits, rank 1 replies late, then dies
    g = ringcast.ReplyGather(2, liveness_interval=interval)
    h = g.export_handle()
    def early():
        w = ringcast.ReplyGather.create_from_handle(h, 0)
        w.reply(1, "zero")
        time.sleep(2 * interval)
        os._exit(0)  # gone without closing its ring, while the collect still waits for rank 1

    early_pid = fork_child(early)

    def late():
        w = ringcast.ReplyGather.create_from_handle(h, 1)
        time.sleep(5 * interval)
        w.reply(1, "one")
        time.sleep(60)

    late_pid = fork_child(late)
    assert run("default", aio.collect(g, 1, timeout=30)) == ["zero", "one"]
    assert reap(early_pid) == 0
    kill_and_reap(late_pid)
    assert "rank 1" in run("default", timed(aio.collect(g, 2, ranks=[1], timeout=30)))

    async def pending():
        return await g.collect_async(3, ranks=[1], timeout=30)

    assert "rank 1" in run("default", timed(pending()))
    with pytest.raises(ringcast.PeerDeadError):  # the ended collect left the gather usable
        g.collect(4, ranks=[1], timeout=5)
    g.close()


def test_data_a_peer_left_before_it_died_is_taken_not_reported_dead():
    """A writer that enqueues and then dies while the loop is busy past its liveness interval: the
    await takes the message (it looks for data before it checks the peer, as a blocking wait does)."""
    rfd, wfd = os.pipe()

    def writer():
        q = ringcast.MessageQueue(1, 1, liveness_interval=0.2, **QUEUE_KW)
        os.write(wfd, pickle.dumps(q.export_handle()))
        q.wait_until_ready(timeout=30)
        time.sleep(0.3)
        q.enqueue("last words", timeout=5)
        os._exit(0)  # gone without closing the queue

    pid = fork_child(writer)
    os.close(wfd)
    handle = pickle.loads(os.read(rfd, 65536))
    os.close(rfd)
    reader = ringcast.MessageQueue.create_from_handle(handle, 0)

    async def main():
        task = asyncio.ensure_future(aio.dequeue(reader, timeout=30))
        await asyncio.sleep(0.05)  # the dequeue armed and waits
        time.sleep(1.0)  # the loop is busy: the message comes, the writer dies, the check falls due
        return await task

    assert run("default", main()) == "last words"
    assert reap(pid) == 0
    reader.shutdown()


# ---- one waiter per endpoint; the loop leaves the fd to the endpoint's blocking calls -----------------
ONE_AT_A_TIME = "one coroutine at a time may wait on an endpoint"


@pytest.mark.parametrize("loop_kind", LOOPS)
def test_a_second_dequeue_async_of_a_reader_is_refused_and_the_first_still_completes(loop_kind):
    """A dequeue_async while another one of the reader waits raises RuntimeError at once (two waits
    would share the reader's one announcement and one loop future: the first was orphaned and never
    completed, timeout or not). The first one receives the message; an ended one (done, timed out,
    cancelled) leaves the reader free for the next, a refused one does not free it."""
    q = ringcast.MessageQueue(1, 1, **QUEUE_KW)
    r = ringcast.MessageQueue.create_from_handle(q.export_handle(), 0)

    async def main():
        first = asyncio.ensure_future(r.dequeue_async(timeout=5))
        await asyncio.sleep(0.02)  # first is armed and waits
        second = asyncio.ensure_future(r.dequeue_async(timeout=1))
        await asyncio.sleep(0.02)
        assert second.done(), "a second dequeue_async waits beside the first"
        with pytest.raises(RuntimeError, match=f"dequeue_async.*{ONE_AT_A_TIME}"):
            second.result()
        with pytest.raises(RuntimeError, match=ONE_AT_A_TIME):  # the refused call did not free the reader
            await r.dequeue_async(timeout=0)
        q.enqueue("one", timeout=1)
        assert await asyncio.wait_for(first, 2) == "one"

        with pytest.raises(TimeoutError):  # completed: free; timed out: free
            await r.dequeue_async(timeout=0.02)
        cancelled = asyncio.ensure_future(r.dequeue_async())
        await asyncio.sleep(0.02)
        cancelled.cancel()
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        q.enqueue("two", timeout=1)  # cancelled: free
        assert await r.dequeue_async(timeout=1) == "two"

    run(loop_kind, main())
    r.shutdown()
    q.shutdown()


@pytest.mark.parametrize("loop_kind", LOOPS)
def test_a_second_collect_await_of_a_gather_is_refused_and_the_first_still_completes(loop_kind):
    """The same for a ReplyGather's collector: an aio.collect while another one waits, and a second
    await of a pending collect_async, raise RuntimeError at once; the first collects its replies."""
    g = ringcast.ReplyGather(2)
    h = g.export_handle()
    workers = [ringcast.ReplyGather.create_from_handle(h, rank) for rank in range(2)]

    async def await_it(pending):
        return await pending

    async def main():
        first = asyncio.ensure_future(aio.collect(g, 0, timeout=5))
        await asyncio.sleep(0.02)  # first waits for both ranks
        second = asyncio.ensure_future(aio.collect(g, 1, timeout=1))
        await asyncio.sleep(0.02)
        assert second.done(), "a second collect waits beside the first"
        with pytest.raises(RuntimeError, match=f"collect.*{ONE_AT_A_TIME}"):
            second.result()
        for rank, w in enumerate(workers):
            w.reply(0, ("reply", 0, rank))
        assert await asyncio.wait_for(first, 2) == [("reply", 0, 0), ("reply", 0, 1)]

        pending = g.collect_async(1, timeout=5)
        awaiting = asyncio.ensure_future(await_it(pending))
        await asyncio.sleep(0.02)
        again = asyncio.ensure_future(await_it(pending))
        await asyncio.sleep(0.02)
        assert again.done(), "a second await of the pending collect waits beside the first"
        with pytest.raises(RuntimeError, match=f"collect_async.*{ONE_AT_A_TIME}"):
            again.result()
        awaiting.cancel()  # a cancelled await frees the collector: the next await collects
        with pytest.raises(asyncio.CancelledError):
            await awaiting
        for rank, w in enumerate(workers):
            w.reply(1, ("reply", 1, rank))
        return await asyncio.wait_for(await_it(pending), 2)

    assert run(loop_kind, main()) == [("reply", 1, 0), ("reply", 1, 1)]
    for w in workers:
        w.close()
    g.close()


@pytest.mark.parametrize("loop_kind", LOOPS)
def test_after_a_dequeue_async_a_blocking_dequeue_in_a_thread_is_woken_promptly(loop_kind):
    """Once wake_fd() was armed the reader's blocking calls sleep on its eventfd too. After one
    dequeue_async (the loop has watched the fd), blocking dequeues in an executor thread receive a
    writer process's messages, 5 ms apart, as they come: the loop, with no wait of its own pending,
    must not read the fd (it ate the thread's wakes: up to its next liveness slice, ~100 ms, late)."""
    count = 100

    def body(q):
        time.sleep(0.3)  # the dequeue_async below arms and waits on the loop
        q.enqueue("first", timeout=10)
        time.sleep(0.1)  # the executor's dequeue is asleep
        for _ in range(count):
            time.sleep(0.005)
            q.enqueue(time.monotonic(), timeout=10)  # CLOCK_MONOTONIC: one clock for both processes

    pid, r = spawn_writer(body)
    executor = concurrent.futures.ThreadPoolExecutor(1)

    async def main():
        loop = asyncio.get_running_loop()
        t0 = time.monotonic()
        assert await r.dequeue_async(timeout=10) == "first"
        assert time.monotonic() - t0 > 0.1, "the dequeue_async did not wait on the loop"
        late = []
        for _ in range(count):
            sent = await loop.run_in_executor(executor, r.dequeue, 10)
            late.append(time.monotonic() - sent)
        return late

    try:
        late = run(loop_kind, main())
    finally:
        executor.shutdown(wait=True)
    slow = [round(s * 1000, 1) for s in late if s > 0.05]
    assert not slow, f"{len(slow)} of {count} messages reached the blocking dequeue late (ms): {slow}"
    assert reap(pid) == 0
    r.shutdown()


@pytest.mark.parametrize("loop_kind", LOOPS)
def test_a_forked_child_that_exits_normally_leaves_the_parents_loop_watching(loop_kind):
    """A child inherits the loop's epoll instance, which it shares with the parent; its exit runs the
    endpoints' finalizers, and a finalizer that unregistered the eventfd there unregistered it in the
    parent: every later await waited for its liveness check (~1 s) instead of the message."""
    def body(q):
        for _ in range(4):
            time.sleep(0.05)
            q.enqueue(time.monotonic(), timeout=10)

    if loop_kind == "uvloop":
        loop = uvloop.new_event_loop()
    else:
        loop = asyncio.new_event_loop()
    pid, r = spawn_writer(body)
    try:
        assert isinstance(loop.run_until_complete(r.dequeue_async(timeout=10)), float)  # the fd is watched now
        child = os.fork()
        if child == 0:  # a normal exit's clean-up (atexit runs weakref.finalize's), not os._exit's
            import atexit
            atexit._run_exitfuncs()
            os._exit(0)
        assert os.waitpid(child, 0)[1] == 0
        lates = []
        for _ in range(3):
            sent = loop.run_until_complete(r.dequeue_async(timeout=10))
            lates.append(time.monotonic() - sent)
        assert max(lates) < 0.5, f"awaits came late after the child's exit: {[round(x, 3) for x in lates]} s"
    finally:
        loop.close()
        r.shutdown()
        assert reap(pid) == 0


@pytest.mark.parametrize("loop_kind", LOOPS)
def test_a_timed_out_await_runs_its_timer_about_once(loop_kind):
    """uvloop's clock moves in whole milliseconds and runs a timer up to a tick early: re-arming the
    timer for a deadline less than a tick away made it fire again at once, dozens of times per
    timed-out await (the loop spun until its clock caught up)."""
    mq = ringcast.MessageQueue(1, 1, **QUEUE_KW)
    r = ringcast.MessageQueue.create_from_handle(mq.export_handle(), 0)
    g = ringcast.ReplyGather(1)
    fired = [0]
    original = aio._Watch._timer_fired

    def counted(self):
        fired[0] += 1
        original(self)

    async def main():
        timeouts = 0
        for i in range(20):
            for call in (lambda: r.dequeue_async(timeout=0.002 + i * 0.0007),
                         lambda: g.collect_async(i, timeout=0.002 + i * 0.0007),
                         lambda: aio.collect(g, 100 + i, [0], timeout=0.002 + i * 0.0007)):
                try:
                    await call()
                except TimeoutError:
                    timeouts += 1
        return timeouts

    aio._Watch._timer_fired = counted
    try:
        assert run(loop_kind, main()) == 60
    finally:
        aio._Watch._timer_fired = original
        r.shutdown()
        mq.shutdown()
        g.close()
    assert fired[0] <= 2 * 60, f"{fired[0]} timer callbacks for 60 timed-out awaits"


def test_aio_collect_takes_one_rank_as_collect_does():
    g = ringcast.ReplyGather(2)
    w = ringcast.ReplyGather.create_from_handle(g.export_handle(), 1)
    try:
        w.reply(7, "from 1")
        assert run("default", aio.collect(g, 7, 1, timeout=5)) == ["from 1"]
        with pytest.raises(ValueError, match="out of range"):
            run("default", aio.collect(g, 8, 5, timeout=5))
        with pytest.raises(TypeError, match="tag must be an int, got bool"):  # not tag 1
            run("default", aio.collect(g, True, timeout=5))
    finally:
        w.close()
        g.close()


@pytest.mark.parametrize("loop_kind", LOOPS)
def test_blocking_calls_beside_a_pending_await_are_refused_and_its_cancellation_stays_one(loop_kind):
    """A blocking read of a reader (another thread's, say) while a dequeue_async waits on it would take
    the message or the wake-up that await waits for, and a cancellation arriving while the thread was
    inside the endpoint came out of the await as RuntimeError ("already in use by another thread")
    instead of CancelledError: such calls are refused while an aio call holds the endpoint."""
    mq = ringcast.MessageQueue(1, 1, **QUEUE_KW)
    r = ringcast.MessageQueue.create_from_handle(mq.export_handle(), 0)
    g = ringcast.ReplyGather(1)
    refusals = []

    def in_a_thread(call):
        out = []
        t = threading.Thread(target=lambda: out.append(_outcome(call)))
        t.start()
        t.join(10)
        return out[0]

    async def main():
        task = asyncio.ensure_future(r.dequeue_async(timeout=30))
        await asyncio.sleep(0.05)
        refusals.append(in_a_thread(lambda: r.dequeue(timeout=0.2)))
        refusals.append(in_a_thread(lambda: r.dequeue_many(4, timeout=0.2)))
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            refusals.append("cancelled")
        collect = asyncio.ensure_future(aio.collect(g, 1, timeout=30))
        await asyncio.sleep(0.05)
        refusals.append(in_a_thread(lambda: g.collect(1, timeout=0.2)))
        collect.cancel()
        with pytest.raises(asyncio.CancelledError):
            await collect
        pending = g.collect_async(2, timeout=1.0)
        awaited = asyncio.ensure_future(_await(pending))
        await asyncio.sleep(0.05)
        refusals.append(_outcome(pending.result))
        awaited.cancel()
        with pytest.raises(asyncio.CancelledError):
            await awaited
        return pending

    pending = run(loop_kind, main())
    try:
        assert refusals[:2] == ["RuntimeError: dequeue: dequeue_async of this reader is in progress on an event loop",
                                "RuntimeError: dequeue_many: dequeue_async of this reader is in progress on an "
                                "event loop"]
        assert refusals[2] == "cancelled"
        assert refusals[3] == "RuntimeError: collect: collect of this ReplyGather is in progress on an event loop"
        assert refusals[4] == ("RuntimeError: result(): await collect_async(...) of this ReplyGather is in progress "
                               "on an event loop")
        mq.enqueue("after")  # the endpoints work again once the awaits ended
        assert r.dequeue(timeout=5) == "after"
        with pytest.raises(TimeoutError):
            pending.result()  # the cancelled await left the collect pending; nobody replies
    finally:
        r.shutdown()
        mq.shutdown()
        g.close()


async def _await(pending):
    return await pending


def _outcome(call):
    try:
        return repr(call())
    except Exception as e:  # noqa: BLE001 — the outcome is the test's subject
        text = str(e)
        return f"{type(e).__name__}: {text.split(';')[0]}"


@pytest.mark.parametrize("loop_kind", LOOPS)
def test_a_call_left_on_a_closed_loop_gives_its_endpoint_back(loop_kind):
    """A loop closed while an await of it was suspended never resumes it: the next call of the endpoint
    takes the endpoint back (withdrawing that call's wait, and an enqueue's message) instead of being
    refused for good as "already in progress"."""
    new = uvloop.new_event_loop if loop_kind == "uvloop" else asyncio.new_event_loop
    mq = ringcast.MessageQueue(1, 1, max_chunk_bytes=4096, max_chunks=4)  # a 64 KiB ring
    r = ringcast.MessageQueue.create_from_handle(mq.export_handle(), 0)
    g = ringcast.ReplyGather(1)
    w = ringcast.ReplyGather.create_from_handle(g.export_handle(), 0)
    try:
        def leave_on_a_closed_loop(coro):
            loop = new()
            task = loop.create_task(coro)
            loop.run_until_complete(asyncio.sleep(0.05))
            assert not task.done()
            loop.close()  # without cancelling it (asyncio logs "Task was destroyed but it is pending")

        leave_on_a_closed_loop(r.dequeue_async(timeout=30))
        leave_on_a_closed_loop(mq.enqueue_async(b"x" * 200_000, timeout=30))  # more than the ring: pending
        pending = g.collect_async(2, timeout=30)
        leave_on_a_closed_loop(_await(pending))
        w.reply(2, "two")
        assert pending.result() == ["two"]  # the await taken back; the collect it awaited is the caller's
        leave_on_a_closed_loop(aio.collect(g, 1, timeout=30))
        with pytest.raises(TimeoutError):  # the withdrawn 200 KB message: none of it is delivered
            r.dequeue(timeout=0.2)
        mq.enqueue("blocking")  # the writer's pending message was withdrawn: room again
        assert run(loop_kind, r.dequeue_async(timeout=5)) == "blocking"
        run(loop_kind, mq.enqueue_async("async", timeout=5))
        assert r.dequeue(timeout=5) == "async"
        w.reply(1, "one")
        assert run(loop_kind, aio.collect(g, 1, timeout=5)) == ["one"]
        w.reply(3, "three")
        assert g.collect(3, timeout=5) == ["three"]
    finally:
        w.close()
        g.close()
        r.shutdown()
        mq.shutdown()


def test_a_blocking_call_that_looked_as_the_await_ended_goes_on():
    """The owner's `_aio_call` is read by a blocking call in another thread while the loop's thread may
    clear it: found set by the caller's check, then cleared, it is no refusal (it was an AttributeError)."""
    mq = ringcast.MessageQueue(1, 1, **QUEUE_KW)
    r = ringcast.MessageQueue.create_from_handle(mq.export_handle(), 0)
    try:
        assert r._aio_call is None
        aio.refuse_blocking_call(r, r._reader, "dequeue")  # what the caller runs after its look
        mq.enqueue(1)
        assert r.dequeue(timeout=5) == 1
    finally:
        r.shutdown()
        mq.shutdown()


@pytest.mark.parametrize("loop_kind", LOOPS)
def test_a_timed_out_await_never_ends_before_its_timeout(loop_kind):
    """uvloop's loop.time() is read once per loop iteration and lags the monotonic clock: judged by it
    alone, dequeue_async, enqueue_async and aio.collect raised TimeoutError up to ~0.7 ms early (an
    awaited collect_async never did: it went on to the collector's own deadline)."""
    empty = ringcast.MessageQueue(1, 1, **QUEUE_KW)  # nothing is sent: dequeue_async waits
    r = ringcast.MessageQueue.create_from_handle(empty.export_handle(), 0)
    full = ringcast.MessageQueue(1, 1, **QUEUE_KW)  # nobody reads: enqueue_async waits for room
    r_full = ringcast.MessageQueue.create_from_handle(full.export_handle(), 0)
    for size in (3000, 1):  # to the last byte
        while True:
            try:
                full.enqueue(b"x" * size, timeout=0)
            except TimeoutError:
                break
    g = ringcast.ReplyGather(1)  # no worker replies: aio.collect waits

    async def main():
        early = []
        for i in range(15):
            timeout = 0.002 + i * 0.0003
            for name, call in (("dequeue_async", lambda: r.dequeue_async(timeout=timeout)),
                               ("enqueue_async", lambda: full.enqueue_async(b"x", timeout=timeout)),
                               ("aio.collect", lambda: aio.collect(g, i, [0], timeout=timeout)),
                               ("await collect_async", lambda: g.collect_async(100 + i, [0], timeout=timeout))):
                t0 = time.monotonic()
                with pytest.raises(TimeoutError):
                    await call()
                took = time.monotonic() - t0
                if took < timeout:
                    early.append((name, round(timeout * 1e3, 2), round(took * 1e3, 3)))
        return early

    try:
        assert run(loop_kind, main()) == [], "(call, timeout ms, ended after ms)"
    finally:
        for e in (r, r_full, empty, full):
            e.shutdown()
        g.close()


def test_two_threads_loops_claiming_one_reader_at_once_let_one_through(monkeypatch):
    """Two event loops in two threads await one reader's dequeue_async at the same moment: one waits,
    the other is refused (RuntimeError naming the other thread's loop). The claim's look and its mark
    were two steps with no lock between them: a thread switch there (forced here: the first claim's
    record is built slowly, GIL released) let both through, both armed the reader's one announcement,
    and each waited as if it were alone."""
    mq = ringcast.MessageQueue(1, 1, **QUEUE_KW)
    r = ringcast.MessageQueue.create_from_handle(mq.export_handle(), 0)
    first_is_claiming = threading.Event()

    class SlowFirstClaim(aio._Claim):
        __slots__ = ()

        def __init__(self, *args):
            if not first_is_claiming.is_set():
                first_is_claiming.set()
                time.sleep(0.3)  # the second thread's claim runs meanwhile
            super().__init__(*args)

    monkeypatch.setattr(aio, "_Claim", SlowFirstClaim)
    outcomes = {}

    def consumer(name):
        try:
            outcomes[name] = asyncio.run(r.dequeue_async(timeout=20))
        except BaseException as e:  # noqa: BLE001 - recorded and checked below
            outcomes[name] = e

    first = threading.Thread(target=consumer, args=("first",))
    first.start()
    assert first_is_claiming.wait(5)
    second = threading.Thread(target=consumer, args=("second",))
    second.start()
    second.join(10)
    assert isinstance(outcomes.get("second"), RuntimeError), outcomes
    assert "another thread's event loop" in str(outcomes["second"]) and ONE_AT_A_TIME in str(outcomes["second"])
    mq.enqueue("only", timeout=1)
    first.join(10)
    assert outcomes["first"] == "only"
    r.shutdown()
    mq.shutdown()


def test_an_endpoint_dropped_on_another_thread_is_unregistered_on_its_loops_thread():
    """The endpoint's finalizer runs wherever its last reference goes; its _Watch's fd registration
    and timer belong to the thread running the loop (asyncio's selector map; libuv's handles under
    uvloop, which another thread must never touch). Here the loop first runs on the main thread (where
    the _Watch is made), then in another thread; the endpoint is dropped on the main thread: the fd is
    unregistered on the loop's thread now, then closed."""
    loop = asyncio.new_event_loop()
    removed_on = []
    real_remove_reader = loop.remove_reader

    def recording_remove_reader(fd):
        removed_on.append((threading.get_ident(), fd))
        return real_remove_reader(fd)

    loop.remove_reader = recording_remove_reader
    mq = ringcast.MessageQueue(1, 1, **QUEUE_KW)
    r = ringcast.MessageQueue.create_from_handle(mq.export_handle(), 0)
    with pytest.raises(TimeoutError):  # registers the reader's fd with the loop, a timer too
        loop.run_until_complete(r.dequeue_async(timeout=0.05))
    loop_thread = threading.Thread(target=loop.run_forever)
    loop_thread.start()
    try:
        with pytest.raises(TimeoutError):
            asyncio.run_coroutine_threadsafe(r.dequeue_async(timeout=0.05), loop).result(10)
        (watch,) = aio._watches[r._reader].values()
        fd = watch.fd
        assert watch.watching and fd >= 0
        del r, watch  # nothing signals the fd: only the finalizer unregisters it
        gc.collect()  # the finalizer runs here, on the main thread
        end = time.monotonic() + 5
        while not removed_on and time.monotonic() < end:
            time.sleep(0.01)
        assert removed_on == [(loop_thread.ident, fd)]
        end = time.monotonic() + 5
        while _fd_open(fd) and time.monotonic() < end:
            time.sleep(0.01)
        assert not _fd_open(fd)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        loop_thread.join(10)
        loop.close()
        mq.shutdown()


def _fd_open(fd):
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def test_a_close_handed_to_a_loop_that_stops_unrun_still_closes_the_fd():
    """A close handed to a running loop (the endpoint dropped on another thread) that the loop never
    runs — it was in its last iteration, then closed, which drops its queue — closed nothing: the
    watch's duplicated eventfd stayed open for the life of the process."""
    loop = asyncio.new_event_loop()
    loop_thread = threading.Thread(target=loop.run_forever)
    loop_thread.start()
    mq = ringcast.MessageQueue(1, 1, **QUEUE_KW)
    r = ringcast.MessageQueue.create_from_handle(mq.export_handle(), 0)
    try:
        with pytest.raises(TimeoutError):
            asyncio.run_coroutine_threadsafe(r.dequeue_async(timeout=0.05), loop).result(10)
        (watch,) = aio._watches[r._reader].values()
        fd = watch.fd
        del watch
        in_last_callback, go_on = threading.Event(), threading.Event()

        def last_callback():  # as run_until_complete's done callback: stop() in the loop's last iteration
            in_last_callback.set()
            go_on.wait(5)
            loop.stop()

        loop.call_soon_threadsafe(last_callback)
        assert in_last_callback.wait(5)
        del r
        gc.collect()  # the finalizer, here: the loop runs, so the close is handed to it
        go_on.set()
        loop_thread.join(10)
        loop.close()  # drops the handed close unrun
        gc.collect()
        assert not _fd_open(fd), os.readlink(f"/proc/self/fd/{fd}")
    finally:
        go_on.set()
        if not loop.is_closed():
            loop.call_soon_threadsafe(loop.stop)
            loop_thread.join(10)
            loop.close()
        mq.shutdown()


def test_a_collection_while_a_claim_holds_the_lock_finalizes_an_abandoned_call_without_deadlock(monkeypatch):
    """A dequeue_async left suspended on a loop closed without cancelling it is taken back by the next
    call's claim, under the claims' lock; that makes the abandoned coroutine garbage. A collection on
    that thread while the lock is held (forced here inside the claim; any allocation may start one)
    finalizes the coroutine, whose clean-up ends its call — taking the lock again: with a lock that is
    not re-entrant the thread deadlocked."""
    mq = ringcast.MessageQueue(1, 1, **QUEUE_KW)
    r = ringcast.MessageQueue.create_from_handle(mq.export_handle(), 0)
    abandoned_loop = asyncio.new_event_loop()
    task = abandoned_loop.create_task(r.dequeue_async())
    abandoned_loop.run_until_complete(asyncio.sleep(0.05))  # suspended in its wait
    abandoned_loop.close()  # without cancelling it
    del task

    class CollectingClaim(aio._Claim):
        __slots__ = ()

        def __init__(self, *args):
            gc.collect()
            super().__init__(*args)

    monkeypatch.setattr(aio, "_Claim", CollectingClaim)
    outcome = []

    def second_call():
        try:
            asyncio.run(r.dequeue_async(timeout=0.05))
        except TimeoutError:
            outcome.append("timed out")

    t = threading.Thread(target=second_call, daemon=True)
    t.start()
    t.join(20)
    assert not t.is_alive(), "deadlocked: the claim's lock taken again by a finalizer on its own thread"
    assert outcome == ["timed out"]
    r.shutdown()
    mq.shutdown()


def test_a_child_forked_while_another_thread_holds_the_claims_lock_can_still_await():
    """fork() copies a lock another thread holds, held, into a child that has no such thread: every
    awaitable call of the child then waited for it forever. The child gets a fresh lock."""
    mq = ringcast.MessageQueue(1, 1, **QUEUE_KW)
    holding, release = threading.Event(), threading.Event()

    def holder():
        with aio._waiters_lock:
            holding.set()
            release.wait(10)

    t = threading.Thread(target=holder)
    t.start()
    assert holding.wait(5)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            signal.alarm(10)
            r = ringcast.MessageQueue.create_from_handle(mq.export_handle(), 0)
            try:
                asyncio.run(r.dequeue_async(timeout=0.05))
            except TimeoutError:
                code = 0
        finally:
            os._exit(code)
    release.set()
    t.join(10)
    assert reap(pid, 30) == 0
    mq.shutdown()


def test_an_interrupt_as_the_first_records_of_an_enqueue_async_went_out_leaves_the_writer_usable(monkeypatch):
    """A signal handler's exception (KeyboardInterrupt) raised as send_nowait returns — the message
    partly out, its rest pending in the writer — came before enqueue_async's claim and its try: nothing
    abandoned the rest, and every later enqueue of the queue was refused as "in progress" for good
    (reproduced with real signals). Emulated here at the same point (the call returned, then the
    exception): the rest is abandoned, the reader drops the part that went out, and the queue goes on."""
    from ringcast import _core
    q = ringcast.MessageQueue(1, 1, max_chunk_bytes=64 * 1024, max_chunks=4, sweep_abandoned=False)
    r = ringcast.MessageQueue.create_from_handle(q.export_handle(), 0)
    try:
        real = _core.send_nowait
        outcome = []

        def send_nowait_then_interrupt(writer, parts):
            outcome.append(real(writer, parts))
            raise KeyboardInterrupt("as send_nowait returned")

        monkeypatch.setattr(_core, "send_nowait", send_nowait_then_interrupt)
        with pytest.raises(KeyboardInterrupt):
            asyncio.run(q.enqueue_async(bytes(1 << 20)))  # 1 MiB: more than the ring takes at once
        monkeypatch.setattr(_core, "send_nowait", real)
        assert outcome == [False], "the message was meant to be partly out, its rest pending"
        assert q._aio_call is None
        got = []
        reader = threading.Thread(target=lambda: got.extend(r.dequeue(timeout=10) for _ in range(2)))
        reader.start()  # it takes the part that went out (the ring is full of it), then drops it
        q.enqueue("next", timeout=10)
        asyncio.run(q.enqueue_async("after", timeout=10))
        reader.join(15)
        assert got == ["next", "after"]
    finally:
        r.shutdown()
        q.shutdown()
