"""MessageQueue in one process: objects, framing, raw chunks, errors, handles."""
import asyncio
import gc
import os
import pickle
import struct
import time

import pytest

import ringcast
import ringcast._cpus
from _workers import mixed_object, np, pattern, same


def test_round_trip_types(queue_pair):
    q, (r0, r1) = queue_pair(2)
    objs = [None, 0, -5, 3.5, "", "text", b"", b"x" * 10, b"y" * 100_000, bytearray(b"z" * 50_000),
            memoryview(b"m" * 20_000), [1, [2, [3]]], {"k": (1, 2), 3: {4}}, bytearray(), ValueError("e")]
    if np is not None:
        objs += [np.arange(10), np.zeros((300, 70)), np.arange(1000, dtype=np.int16)[::3], np.float64(2.5)]
    for o in objs:
        q.enqueue(o, timeout=5)
        for r in (r0, r1):
            got = r.dequeue(timeout=5)
            if isinstance(o, memoryview):
                assert bytes(got) == o.tobytes()  # a read-only memoryview over the received copy
            elif isinstance(o, Exception):
                assert type(got) is ValueError and got.args == o.args
            else:
                assert same(o, got), (o, got)


def test_every_byte_in_place_wherever_a_message_starts_in_its_line(queue_pair):
    # Back-to-back messages of 0..160 bytes (each behind the framing header of the one-record enqueue)
    # start their records at every 16-byte offset of a cache line and end before, on and past its end.
    q, (r,) = queue_pair(1)
    for n in range(161):
        q.enqueue(pattern(n, n), timeout=5)
        assert r.dequeue(timeout=5) == pattern(n, n), n


@pytest.mark.skipif(np is None, reason="numpy absent")
def test_out_of_band_arrays_own_their_memory(queue_pair):
    q, (r,) = queue_pair(1)
    a = np.arange(100_000, dtype=np.float64)
    q.enqueue({"a": a, "b": a[:10]}, timeout=5)
    got = r.dequeue(timeout=5)
    # The ring space is released and overwritten by later messages; the array must not change.
    for i in range(50):
        q.enqueue(np.full(100_000, -1.0), timeout=5)
        r.dequeue(timeout=5)
    assert (got["a"] == a).all() and (got["b"] == a[:10]).all()
    assert got["a"].flags.writeable  # rebuilt on a bytearray the object owns


def test_messages_larger_than_the_ring(queue_pair):
    q, (r,) = queue_pair(1, max_chunk_bytes=16 * 1024, max_chunks=4)  # 64 KiB ring
    import threading
    sizes = [0, 1, 16 * 1024 - 1, 16 * 1024, 16 * 1024 + 1, 100_000, 1_000_003]
    t = threading.Thread(target=lambda: [q.enqueue(pattern(n, i), timeout=10) for i, n in enumerate(sizes)])
    t.start()
    for i, n in enumerate(sizes):
        assert r.dequeue(timeout=10) == pattern(n, i)
    t.join()


def test_dequeue_many(queue_pair):
    q, (r,) = queue_pair(1)
    for i in range(20):
        q.enqueue(mixed_object(i), timeout=5)
    got = r.dequeue_many(8, timeout=5)
    assert len(got) == 8 and all(same(g, mixed_object(i)) for i, g in enumerate(got))
    got = r.dequeue_many(100, timeout=5)
    assert len(got) == 12 and all(same(g, mixed_object(i + 8)) for i, g in enumerate(got))
    with pytest.raises(TimeoutError):
        r.dequeue_many(5, timeout=0.05)
    q.enqueue("last", timeout=5)
    q.shutdown()
    assert r.dequeue_many(5, timeout=5) == ["last"]  # delivered; the close is reported next
    with pytest.raises(ringcast.ClosedError):
        r.dequeue_many(5, timeout=5)


def _unpickling_fails():
    raise ValueError("this message cannot be unpickled")


class _FailsToUnpickle:
    def __reduce__(self):
        return (_unpickling_fails, ())


_INTERRUPT_NEXT_UNPICKLING = []


def _unpickling_interrupted_once(value):
    if _INTERRUPT_NEXT_UNPICKLING:
        _INTERRUPT_NEXT_UNPICKLING.pop()
        raise KeyboardInterrupt("Ctrl-C while a burst was unpickled")
    return value


class _InterruptedOnce:
    def __init__(self, value):
        self.value = value

    def __reduce__(self):
        return (_unpickling_interrupted_once, (self.value,))


def test_dequeue_many_loses_nothing_of_a_burst_when_a_message_fails_to_unpickle(queue_pair):
    """The burst is off the ring before it is unpickled: what comes before a bad message is returned,
    the next call raises the bad one's error (consumed, as dequeue() consumes it), then the rest
    follows — as dequeue() one by one would deliver them. A KeyboardInterrupt loses nothing either."""
    q, (r,) = queue_pair(1)
    for m in ("m1", "m2", _FailsToUnpickle(), "m4", "m5"):
        q.enqueue(m, timeout=5)
    assert r.dequeue_many(10, timeout=5) == ["m1", "m2"]
    with pytest.raises(ValueError, match="cannot be unpickled"):
        r.dequeue_many(10, timeout=5)
    assert r.dequeue(timeout=5) == "m4", "dequeue() takes what a dequeue_many left, in order"
    with pytest.raises(ringcast.RingcastError, match="dequeue_many"):
        with r.acquire_read(timeout=0):
            pass
    assert r.dequeue_many(10, timeout=5) == ["m5"]
    for m in ("a", "b", _InterruptedOnce("c"), "d"):
        q.enqueue(m, timeout=5)
    _INTERRUPT_NEXT_UNPICKLING.append(1)
    with pytest.raises(KeyboardInterrupt):
        r.dequeue_many(10, timeout=5)
    assert r.dequeue_many(10, timeout=5) == ["a", "b", "c", "d"], "the interrupted burst, whole and in order"


def test_dequeue_many_of_one_message_raises_its_unpickling_error_once_and_keeps_it_through_an_interrupt(queue_pair):
    """A burst of one message (the shorter path most calls take): an unpickling error is raised and the
    message consumed; a KeyboardInterrupt leaves it for the next read; the reader is free after both."""
    q, (r,) = queue_pair(1)
    q.enqueue(_FailsToUnpickle(), timeout=5)
    with pytest.raises(ValueError, match="cannot be unpickled"):
        r.dequeue_many(10, timeout=5)
    with pytest.raises(TimeoutError):
        r.dequeue(timeout=0)
    q.enqueue(_InterruptedOnce("kept"), timeout=5)
    _INTERRUPT_NEXT_UNPICKLING.append(1)
    with pytest.raises(KeyboardInterrupt):
        r.dequeue_many(10, timeout=5)
    assert not _INTERRUPT_NEXT_UNPICKLING
    assert r.dequeue_many(10, timeout=5) == ["kept"]
    q.enqueue("next", timeout=5)
    assert r.dequeue(timeout=5) == "next"


class _InterruptedAsItReturns:
    """A compiled reader whose recv_many is interrupted the moment it returns, as a signal handler's
    KeyboardInterrupt lands there (the eval loop runs handlers right after a call returns)."""

    def __init__(self, reader):
        self._real = reader

    def __getattr__(self, name):
        return getattr(self._real, name)

    def recv_many(self, *args):
        self._real.recv_many(*args)
        raise KeyboardInterrupt


def test_dequeue_many_loses_nothing_when_interrupted_as_its_ring_call_returns(queue_pair):
    """The burst is off the ring once the ring call returns: an interrupt landing then, before Python
    could keep it, would lose it. The binding keeps each message where the next read looks as it takes
    it, so the next reads return the whole burst, in order — a burst of one and of several."""
    q, (r,) = queue_pair(1)
    real = r._reader
    for burst in (["one"], ["a", "b", "c"]):
        for m in burst:
            q.enqueue(m, timeout=5)
        r._reader = _InterruptedAsItReturns(real)
        try:
            with pytest.raises(KeyboardInterrupt):
                r.dequeue_many(10, timeout=5)
        finally:
            r._reader = real
        assert [r.dequeue(timeout=5) for _ in burst] == burst
    q.enqueue("next", timeout=5)
    assert r.dequeue_many(10, timeout=5) == ["next"]


def _reader_of_a_writer_that_dies(messages=()):
    """Forks a writer process (liveness_interval 0.2 s) that waits for its one reader, publishes
    `messages` 0.3 s later and dies without closing; returns (this process's reader, the writer's pid)."""
    import pickle as pickle_module
    import signal
    r_fd, w_fd = os.pipe()
    writer = os.fork()
    if writer == 0:
        try:
            q = ringcast.MessageQueue(1, 1, max_chunk_bytes=1 << 16, max_chunks=4, liveness_interval=0.2)
            os.write(w_fd, pickle_module.dumps(q.export_handle()).hex().encode() + b"\n")
            q.wait_until_ready(timeout=10)
            time.sleep(0.3)
            for m in messages:
                q.enqueue(m, timeout=5)
        finally:
            os.kill(os.getpid(), signal.SIGKILL)
    os.close(w_fd)
    with os.fdopen(r_fd) as f:
        handle = pickle_module.loads(bytes.fromhex(f.readline().strip()))
    return ringcast.MessageQueue.create_from_handle(handle, 0), writer


def test_dequeue_many_reports_a_writer_that_dies_while_it_waits():
    """The writer dies while a dequeue_many waits for its first message (the GIL released): the wait
    raises PeerDeadError, and the reader's burst list comes out of it intact — the binding borrows that
    list and never drops a reference to it without the GIL (python_packaging aborts on one: the
    installed module is built with pybind11's GIL assertions)."""
    r, writer = _reader_of_a_writer_that_dies()  # nothing sent
    try:
        r.wait_until_ready(timeout=10)
        t0 = time.monotonic()
        with pytest.raises(ringcast.PeerDeadError):
            r.dequeue_many(10, timeout=10)
        assert time.monotonic() - t0 < 5, "found dead by the liveness check, not by the timeout"
        assert r._burst_left == []
        with pytest.raises(ringcast.PeerDeadError):
            r.dequeue_many(10, timeout=1)
    finally:
        os.waitpid(writer, 0)
        r.shutdown()


def test_dequeue_many_delivers_what_a_dead_writer_published_then_reports_it():
    """After the first message a burst polls for more, and that poll runs the dead-peer check when it
    is due: the messages it took are returned first; the next call raises PeerDeadError."""
    r, writer = _reader_of_a_writer_that_dies(("m1", "m2", "m3"))
    try:
        with pytest.raises(TimeoutError):
            r.dequeue(timeout=0)  # starts this reader's dead-peer schedule, as any earlier wait
        os.waitpid(writer, 0)
        time.sleep(0.5)  # past liveness_interval: the burst's poll runs the check
        assert r.dequeue_many(10, timeout=1) == ["m1", "m2", "m3"]
        with pytest.raises(ringcast.PeerDeadError):
            r.dequeue_many(10, timeout=1)
    finally:
        r.shutdown()


def test_an_acquire_write_or_read_block_refuses_a_nested_write_or_read_of_its_queue(queue_pair):
    """Inside an acquire_write block the core reservation is the block's: an enqueue or acquire_write
    there would publish into the bytes the block's view shows. Inside an acquire_read block a second
    acquire_read would show the same chunk and free it under the outer view. Both are refused, and
    nothing is sent or lost."""
    q, (r,) = queue_pair(1)
    with q.acquire_write(size=8, timeout=5) as outer:
        outer[:] = b"OUTER---"
        with pytest.raises(ringcast.RingcastError, match="block of this queue is open"):
            q.enqueue("inside", timeout=5)
        with pytest.raises(ringcast.RingcastError, match="block of this queue is open"):
            with q.acquire_write(size=8, timeout=5):
                pass
    q.enqueue("after", timeout=5)
    with q.acquire_write(size=8, timeout=5) as second:
        second[:] = b"SECOND--"
    with r.acquire_read(timeout=5) as v:
        assert bytes(v) == b"OUTER---"
    assert r.dequeue(timeout=5) == "after"
    q.enqueue("third", timeout=5)
    with r.acquire_read(timeout=5) as v:
        with pytest.raises(ringcast.RingcastError, match="block of this queue is open"):
            with r.acquire_read(timeout=5):
                pass
        # a dequeue there names the open block (not "the next message was written with acquire_write()")
        for read in (lambda: r.dequeue(timeout=5), lambda: r.dequeue(timeout=0), lambda: r.dequeue_many(4, timeout=5)):
            with pytest.raises(ringcast.RingcastError, match="dequeue.*: an acquire_read\\(\\) block of this queue is open"):
                read()
        assert bytes(v) == b"SECOND--"
    assert r.dequeue(timeout=5) == "third"
    with pytest.raises(TimeoutError):
        r.dequeue(timeout=0)


@pytest.mark.parametrize("size", [100, 5000])
def test_a_memoryview_is_a_message_like_bytes_whatever_its_size_or_format(queue_pair, size):
    """pickle cannot pickle a memoryview: sent as the message itself it is sent as its bytes, in band
    below oob_threshold and out of band from it — sized in bytes, not in items."""
    import array
    q, (r,) = queue_pair(1)
    raw = bytes(range(256)) * (size // 256 + 1)
    q.enqueue(memoryview(raw[:size]), timeout=5)
    assert bytes(r.dequeue(timeout=5)) == raw[:size]
    doubles = array.array("d", range(size // 8))  # len in items, nbytes in bytes
    q.enqueue(memoryview(doubles), timeout=5)
    assert bytes(r.dequeue(timeout=5)) == doubles.tobytes()


def test_shutdown_from_another_thread_during_a_long_enqueue_reaches_every_reader_alike():
    """A message of several records is being sent when shutdown() comes from another thread: either
    it is sent whole before the close (enqueue returns) or it is withdrawn (enqueue raises
    ClosedError) — and every reader, caught up or behind, sees the same."""
    import threading
    for attempt in range(3):
        q = ringcast.MessageQueue(2, 2, max_chunk_bytes=1 << 20, max_chunks=16)  # 16 MiB ring, 4 MiB records
        h = q.export_handle()
        pipes, pids = [], []
        for rank, delay in ((0, 0.0), (1, 1.0)):
            r_fd, w_fd = os.pipe()
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    os.close(r_fd)
                    r = ringcast.MessageQueue.create_from_handle(h, rank)
                    time.sleep(delay)
                    got = []
                    while True:
                        try:
                            got.append(len(r.dequeue(timeout=20)))
                        except ringcast.ClosedError:
                            break
                    os.write(w_fd, repr(got).encode())
                    code = 0
                finally:
                    os._exit(code)
            os.close(w_fd)
            pipes.append(r_fd)
            pids.append(pid)
        q.wait_until_ready(timeout=10)
        outcome = {}

        def send():
            try:
                q.enqueue(bytes(12 << 20))  # 3+ records
                outcome["sent"] = True
            except ringcast.ClosedError:
                outcome["sent"] = False

        t = threading.Thread(target=send)
        t.start()
        time.sleep(0.002 * attempt)
        q.shutdown()
        t.join(30)
        seen = []
        for fd, pid in zip(pipes, pids):
            with os.fdopen(fd, "rb") as f:
                seen.append(f.read().decode())
            assert os.waitpid(pid, 0)[1] == 0
        expected = repr([12 << 20] if outcome["sent"] else [])
        assert seen == [expected, expected], (attempt, outcome, seen)


def test_a_dead_readers_error_names_its_rank_as_the_caller_knows_it():
    """The core knows a reader by its index in the ring; the caller by local_reader_ranks. The writer's
    PeerDeadError names both, as the timeouts name the index."""
    import signal
    q = ringcast.MessageQueue(2, 2, local_reader_ranks=[5, 7], max_chunk_bytes=4096, max_chunks=4,
                              liveness_interval=0.2)
    h = q.export_handle()
    pids = []
    for rank in (5, 7):
        pid = os.fork()
        if pid == 0:
            try:
                r = ringcast.MessageQueue.create_from_handle(h, rank)
                if rank == 7:
                    os.kill(os.getpid(), signal.SIGKILL)  # dies holding its place
                while True:
                    r.dequeue(timeout=5)
            finally:
                os._exit(0)
        pids.append(pid)
    try:
        q.wait_until_ready(timeout=10)
        with pytest.raises(ringcast.PeerDeadError, match=rf"reader rank index 1 \(rank 7, pid {pids[1]}\) died"):
            for _ in range(100):  # the ring fills: the writer waits for rank 7, then finds it dead
                q.enqueue(bytes(10000), timeout=10)
    finally:
        q.shutdown()
        for pid in pids:
            os.waitpid(pid, 0)


def test_acquire_write_read(queue_pair):
    q, (r0, r1) = queue_pair(2)
    with q.acquire_write(timeout=5) as buf:
        assert len(buf) == q.max_chunk_bytes and not buf.readonly
        buf[:5] = b"hello"
    with q.acquire_write(timeout=5, size=3) as buf:
        buf[:] = b"abc"
    with pytest.raises(KeyError):
        with q.acquire_write(timeout=5, size=3) as buf:
            buf[:] = b"xxx"
            raise KeyError("dropped")
    q.enqueue("obj", timeout=5)
    for r in (r0, r1):
        with r.acquire_read(timeout=5) as buf:
            assert buf.readonly and bytes(buf[:5]) == b"hello" and len(buf) == q.max_chunk_bytes
        with r.acquire_read(timeout=5) as buf:
            assert bytes(buf) == b"abc"
        with pytest.raises(ringcast.RingcastError, match="dequeue"):
            with r.acquire_read(timeout=5):
                pass
        assert r.dequeue(timeout=5) == "obj"  # left in place by the refused acquire_read


def test_broadcast_object(queue_pair):
    q, (r,) = queue_pair(1)
    assert q.broadcast_object({"x": 1}) == {"x": 1}
    assert r.broadcast_object() == {"x": 1}


def test_timeouts(queue_pair):
    q, (r,) = queue_pair(1, max_chunk_bytes=16 * 1024, max_chunks=4)
    with pytest.raises(TimeoutError):
        r.dequeue(timeout=0)
    with pytest.raises(TimeoutError):
        r.dequeue(timeout=0.05)
    with pytest.raises(ValueError):
        r.dequeue(timeout=-1)
    # Fill the 64 KiB ring: the writer times out instead of overwriting unread data.
    with pytest.raises(TimeoutError):
        for _ in range(100):
            q.enqueue(b"f" * 10_000, timeout=0.05)
    n = 0
    while True:
        try:
            assert r.dequeue(timeout=0) == b"f" * 10_000
            n += 1
        except TimeoutError:
            break
    assert n >= 4
    # A message that timed out half way is withdrawn: readers never see a torn one.
    with pytest.raises(TimeoutError):
        q.enqueue(pattern(1_000_000, 1), timeout=0.05)
    for _ in range(8):
        with pytest.raises(TimeoutError):
            r.dequeue(timeout=0.01)
    q.enqueue("after", timeout=5)
    assert r.dequeue(timeout=5) == "after"


def test_closed_after_drain(queue_pair):
    q, (r,) = queue_pair(1)
    q.enqueue(1, timeout=5)
    q.enqueue(2, timeout=5)
    q.shutdown()
    assert r.dequeue(timeout=5) == 1 and r.dequeue(timeout=5) == 2
    with pytest.raises(ringcast.ClosedError):
        r.dequeue(timeout=5)
    with pytest.raises(ringcast.ClosedError):
        q.enqueue(3)
    assert issubclass(ringcast.ClosedError, ringcast.RingcastError)
    assert issubclass(ringcast.PeerDeadError, ringcast.RingcastError)


def test_constructor_validation():
    with pytest.raises((ValueError, ImportError), match="remote reader"):  # remote readers need connect_ip
        ringcast.MessageQueue(3, 2)
    with pytest.raises(ValueError):
        ringcast.MessageQueue(1, 2)
    with pytest.raises(ValueError, match="duplicates"):
        ringcast.MessageQueue(2, 2, local_reader_ranks=[1, 1])
    with pytest.raises(ValueError):
        ringcast.MessageQueue(2, 2, local_reader_ranks=[1])
    with pytest.raises(TypeError):
        ringcast.MessageQueue("2", 2)
    with pytest.raises(ValueError):
        ringcast.MessageQueue(1, 1, wait="bogus")


def test_handles(queue_pair):
    q, _ = queue_pair(2)
    h = pickle.loads(pickle.dumps(q.export_handle()))
    assert h == q.export_handle() and h.buffer_handle[3] == q.name
    with pytest.raises(ValueError, match="not a local reader"):
        ringcast.MessageQueue.create_from_handle(h, 7)
    for not_an_int in (0.0, "0", True):  # 0.0 == 0 would otherwise attach rank 0
        with pytest.raises(TypeError, match="rank must be an int"):
            ringcast.MessageQueue.create_from_handle(h, not_an_int)
    with pytest.raises(ValueError, match="already attached"):  # queue_pair attached both ranks
        ringcast.MessageQueue.create_from_handle(h, 0)
    with pytest.raises(ValueError):
        ringcast.MessageQueue.create_from_handle("not a handle", 0)


def test_a_rank_attached_twice_is_named_by_its_own_number():
    # The core counts the ring's reader slots; rank 5 is slot 1 here, and the error is the caller's rank.
    q = ringcast.MessageQueue(2, 2, local_reader_ranks=[3, 5], max_chunk_bytes=1 << 16, max_chunks=4)
    r = ringcast.MessageQueue.create_from_handle(q.export_handle(), 5)
    try:
        with pytest.raises(ValueError) as info:
            ringcast.MessageQueue.create_from_handle(q.export_handle(), 5)
        assert str(info.value) == (f"cannot attach rank 5 to queue '{q.name}': rank 5 is already attached by "
                                   f"live pid {os.getpid()}")
    finally:
        r.shutdown()
        q.shutdown()


def test_an_overwritten_header_is_reported_as_corrupt_not_as_a_stale_handle():
    q = ringcast.MessageQueue(1, 1, max_chunk_bytes=16 * 1024, max_chunks=4)
    h = q.export_handle()
    try:
        with open(f"/dev/shm/{h.name}", "r+b") as f:  # something scribbled over the header
            f.write(b"\xff" * 64)
        with pytest.raises(ringcast.SegmentError, match=r"foreign magic.*header was overwritten \(corrupt\)") as e:
            ringcast.MessageQueue.create_from_handle(h, 0)
        assert "stale" not in str(e.value)
        assert isinstance(e.value, ValueError) and isinstance(e.value, ringcast.RingcastError)
    finally:
        q.shutdown()


# SegmentHeader (include/ringcast/layout.hpp): the words the tests below overwrite.
HEADER_ABI_VERSION, HEADER_CAPACITY, HEADER_TOTAL_SIZE, HEADER_FLAGS = 8, 16, 24, 64


def _overwrite(name, offset, data):
    with open(f"/dev/shm/{name}", "r+b") as f:
        f.seek(offset)
        f.write(data)


@pytest.mark.parametrize("offset, word, reason", [
    (HEADER_ABI_VERSION, 99, "version"),
    (HEADER_FLAGS, 0x80, "corrupt header: flags 0x80"),  # a bit ringcast never sets
])
def test_a_segment_of_another_version_or_with_a_corrupt_field_raises_segment_error(offset, word, reason):
    """Every cause of an unusable segment is one exception type (a ValueError too), named in its text."""
    q = ringcast.MessageQueue(1, 1, max_chunk_bytes=16 * 1024, max_chunks=4)
    h = q.export_handle()
    try:
        _overwrite(h.name, offset, struct.pack("<I", word))
        with pytest.raises(ringcast.SegmentError, match=reason) as e:
            ringcast.MessageQueue.create_from_handle(h, 0)
        assert isinstance(e.value, ValueError) and "stale" not in str(e.value)
    finally:
        _overwrite(h.name, offset, struct.pack("<I", 0 if offset == HEADER_FLAGS else ringcast._core.ABI_VERSION))
        q.shutdown()


def test_a_corrupt_message_in_the_ring_raises_segment_error():
    """A record whose message bytes were overwritten in the ring: the read says corrupt, as SegmentError."""
    q = ringcast.MessageQueue(1, 1, max_chunk_bytes=16 * 1024, max_chunks=4)
    r = ringcast.MessageQueue.create_from_handle(q.export_handle(), 0)
    try:
        q.enqueue("hello", timeout=5)
        with open(f"/dev/shm/{q.export_handle().name}", "r+b") as f:
            capacity, total_size = struct.unpack("<QQ", f.read(32)[HEADER_CAPACITY:32])
            f.seek(total_size - capacity + 16)  # the data ring's first record, past its 16-byte header
            f.write(b"\xde\xad\xbe\xef")  # the message's frame magic
        with pytest.raises(ringcast.SegmentError, match="bad message magic"):
            r.dequeue(timeout=5)
    finally:
        r.shutdown()
        q.shutdown()


def test_a_message_whose_records_end_early_is_reported_at_that_record_by_every_read():
    """A three-record message whose first record announces the length of two (its part length cut by
    the last record's): the middle record then ends it. That is reported before the record is taken,
    so a dequeue_many stopped by it delivers what came before, and every read after names the same
    record the same way (it stays at the head) — not the next record, as a corruption of another."""
    q = ringcast.MessageQueue(1, 1, max_chunk_bytes=16 * 1024, max_chunks=4)
    r = ringcast.MessageQueue.create_from_handle(q.export_handle(), 0)
    try:
        q.enqueue("a", timeout=5)
        q.enqueue("x" * 80_000, timeout=5)
        with open(f"/dev/shm/{q.export_handle().name}", "r+b") as f:
            capacity, total_size = struct.unpack("<QQ", f.read(32)[HEADER_CAPACITY:32])
            data = total_size - capacity
            records, pos = [], 0
            for _ in range(4):  # "a", then the first, middle and last records of the long message
                f.seek(data + pos)
                length = struct.unpack("<I", f.read(4))[0]
                records.append((pos, length))
                pos += 16 + (length + 15) // 16 * 16
            (first, _), (_, last_length) = records[1], records[3]
            f.seek(data + first + 16 + 8)  # the first record's payload: magic, part count, part length
            part = struct.unpack("<Q", f.read(8))[0]
            f.seek(data + first + 16 + 8)
            f.write(struct.pack("<Q", part - last_length))
        assert r.dequeue_many(4, timeout=5) == ["a"]
        for _ in range(2):
            with pytest.raises(ringcast.SegmentError, match="message ended on a non-final record"):
                r.dequeue(timeout=5)
    finally:
        r.shutdown()
        q.shutdown()


def test_custom_ranks_and_stale_handle():
    q = ringcast.MessageQueue(2, 2, local_reader_ranks=[4, 9], max_chunk_bytes=16 * 1024, max_chunks=4)
    h = q.export_handle()
    r = ringcast.MessageQueue.create_from_handle(h, 9)
    assert r.local_reader_rank == 1
    q.enqueue("x", timeout=5)
    assert r.dequeue(timeout=5) == "x"
    with pytest.raises(TimeoutError, match=r"reader rank\(s\) 4 never attached"):  # the rank, not its index 0
        q.wait_until_ready(timeout=0.1)
    q.shutdown()
    with pytest.raises(ValueError, match=r"stale handle: .*shut the queue down or exited, or its name was removed"):
        ringcast.MessageQueue.create_from_handle(h, 4)
    # Same name, re-created: the old handle is recognised as stale.
    q2 = ringcast.MessageQueue(2, 2, local_reader_ranks=[4, 9], name=h.name, max_chunk_bytes=16 * 1024, max_chunks=4)
    try:
        with pytest.raises(ValueError, match="re-created"):
            ringcast.MessageQueue.create_from_handle(h, 4)
    finally:
        q2.shutdown()


def test_role_errors(queue_pair):
    q, (r,) = queue_pair(1)
    with pytest.raises(RuntimeError):
        q.dequeue(timeout=0)
    with pytest.raises(RuntimeError):
        r.enqueue(1)


def test_the_default_adaptive_spin_burns_no_cpu_while_idle():
    """The default (spin_max_us=5000) spins through short waits; a reader whose next message is a
    second away must still sleep: it may spin at most ~5 ms of that second, not the second."""
    import multiprocessing as mp
    from _workers import idle_cpu_reader
    ctx = mp.get_context("spawn")
    q = ringcast.MessageQueue(1, 1, max_chunk_bytes=4096, max_chunks=64)
    assert q.export_handle().spin_max_us == ringcast._queue.default_spin_max_us(1) >= 2000.0, \
        "the adaptive spin is the default"
    results = ctx.Queue()
    burst = 2000
    p = ctx.Process(target=idle_cpu_reader, args=(q.export_handle(), burst, results))
    p.start()
    try:
        q.wait_until_ready(timeout=30)
        for i in range(burst):
            q.enqueue(i, timeout=30)
        time.sleep(1.0)
        q.enqueue("after a second", timeout=30)
        cpu, wall = results.get(timeout=30)
        assert wall >= 0.5, f"the reader's wait was not idle ({wall:.3f} s)"
        assert cpu < 0.05, f"an idle wait of {wall:.2f} s burnt {cpu * 1000:.1f} ms of CPU (spun instead of sleeping)"
    finally:
        q.shutdown()
        p.join(timeout=30)
        if p.is_alive():
            p.kill()


def test_the_default_cap_is_5_ms_where_every_process_has_a_cpu_and_2_ms_where_they_share(monkeypatch):
    """A reader spinning through the writer's preparation takes the writer's CPU where they share one
    (the 2-core VM: ~1.2 ms per async step with 5 ms): the default cap compares the CPUs the queue's
    processes can use (PID 1's affinity: a container's CPU set) with its processes (the writer and
    its local readers), and reaches the readers through the handle."""
    def affinity_of(cpus):
        def get(pid):
            assert pid == 1, "the PID namespace's first process, not this one (a pinned executor)"
            if cpus is None:
                raise PermissionError("not readable here")
            return set(range(cpus))
        return get

    # (CPUs of PID 1, the machine's CPUs, local readers, the cap): PID 1's set wins (a container's
    # CPU set), the machine's count where it cannot be read. No CPU quota (test_cpus.py has those).
    monkeypatch.setattr(ringcast._cpus, "cgroup_cpu_quota", lambda proc_self="/proc/self": None)
    for pid1, machine, n_local, cap in ((16, 16, 8, 5000.0), (9, 64, 8, 5000.0), (8, 64, 8, 2000.0),
                                        (2, 2, 2, 2000.0), (2, 64, 1, 5000.0), (4, 64, 8, 2000.0),
                                        (None, 16, 8, 5000.0), (None, 2, 2, 2000.0), (None, None, 1, 2000.0)):
        monkeypatch.setattr(os, "sched_getaffinity", affinity_of(pid1))
        monkeypatch.setattr(os, "cpu_count", lambda: machine)
        q = ringcast.MessageQueue(n_local, n_local, max_chunk_bytes=4096, max_chunks=4)
        r = ringcast.MessageQueue.create_from_handle(q.export_handle(), 0)
        try:
            assert (q.export_handle().spin_max_us, r._reader.spin_max_us) == (cap, cap), (pid1, machine, n_local)
        finally:
            r.shutdown()
            q.shutdown()
    q = ringcast.MessageQueue(8, 8, max_chunk_bytes=4096, max_chunks=4, spin_max_us=3000.0)  # asked: kept
    try:
        assert q.export_handle().spin_max_us == 3000.0
    finally:
        q.shutdown()


def test_a_default_reader_spins_through_waits_of_a_few_ms(queue_pair, monkeypatch):
    """A worker's wait for the next request lasts the executor's preparation less its own step: a few
    ms, more in a slow episode. The default cap (5 ms) spins through waits of ~3 ms once the reader has
    learned them (about no kernel wait); the C++ reader's 2 ms cap sleeps in each (the predicted
    window's alarm, or the enqueue's wake-up) — the control. Timing-based, with retries. As on a
    machine with a CPU for each (the cap follows the CPUs; the test above)."""
    import threading
    monkeypatch.setattr(ringcast._queue, "usable_cpus", lambda: 64)

    def kernel_waits_for_20_messages(**options):
        q, (r,) = queue_pair(1, **options)
        for i in range(30):
            if i == 10:  # the first ten teach the reader how long its waits last
                before = r._reader.waits
            threading.Timer(0.003, q.enqueue, args=(i,)).start()
            assert r.dequeue(timeout=5) == i
        return r._reader.waits - before

    rounds = []
    for _ in range(3):
        default, cap_2ms = kernel_waits_for_20_messages(), kernel_waits_for_20_messages(spin_max_us=2000.0)
        rounds.append((default, cap_2ms))
        if default <= 10 and cap_2ms >= 15:
            return
    pytest.fail(f"kernel waits out of 20 waits of 3 ms (default cap, 2 ms cap) per round: {rounds}; expected "
                f"default <= 10 and 2 ms >= 15 (control)")


def test_numpy_arrays_travel_while_torch_is_loaded(queue_pair):
    # With torch imported, enqueue looks for device arrays in the object graph (ringcast/_gpu.py); the
    # class numpy.ndarray itself is part of every array's pickle and is no array.
    pytest.importorskip("torch")
    np = pytest.importorskip("numpy")
    q, (r,) = queue_pair(1)
    for a in (np.arange(10), np.zeros((300, 70)), np.arange(1000, dtype=np.int16)[::3]):
        q.enqueue({"a": a}, timeout=5)
        got = r.dequeue(timeout=5)["a"]
        assert got.dtype == a.dtype and (got == a).all()


def test_a_reader_woken_ahead_of_a_message_gets_it_and_a_wake_ahead_alone_loses_nothing(queue_pair):
    """enqueue wakes sleeping readers before it pickles (wake_ahead=True, the default): a reader asleep
    is woken (wake_ahead() says a wake call was made), spins for the message, and gets every one —
    also after a wake-ahead that no message followed."""
    import threading
    q, (r,) = queue_pair(1)
    assert q._wake_ahead
    got = []

    def read():
        for _ in range(4):
            got.append(r.dequeue(timeout=10))

    def wake_a_sleeper():
        # The reader's wait may end in a spin window it predicted (steady gaps): wait until it sleeps.
        deadline = time.monotonic() + 10
        while not q._writer.wake_ahead():
            assert time.monotonic() < deadline, "the reader never slept: no wake call"
            time.sleep(0.013)

    t = threading.Thread(target=read)
    t.start()
    try:
        for i, gap in enumerate((0.05, 0.03, 0.07)):
            time.sleep(gap)  # the reader's wait outlasts its spin: it sleeps in the kernel
            wake_a_sleeper()
            q.enqueue({"i": i, "pad": "x" * 1000})
        wake_a_sleeper()  # and no message: the reader spins, then sleeps again
        time.sleep(0.05)
        q.enqueue({"i": 3})
    finally:
        t.join(timeout=30)
    assert [m["i"] for m in got] == [0, 1, 2, 3]


def test_wake_ahead_is_on_with_the_adaptive_wait_only(queue_pair):
    # The readers wait as the writer says (the handle): only an adaptive hybrid reader spins when woken
    # ahead; a futex or fixed-spin one would sleep again and need the publish's wake too.
    assert queue_pair(1)[0]._wake_ahead
    for kw in ({"wake_ahead": False}, {"wait": "futex"}, {"spin_max_us": 0.0}, {"wait": "spin"}):
        q, (r,) = queue_pair(1, **kw)
        assert not q._wake_ahead, kw
        q.enqueue("x")
        assert r.dequeue(timeout=5) == "x"
    q.shutdown()
    assert q._writer.wake_ahead() is False  # shut down: nothing to wake


def test_a_shut_down_queue_dropped_later_leaves_a_newer_queue_of_its_name():
    """shutdown() removes the name; the writer dropped afterwards must not remove it again when by then
    it is another queue's (readers of that one could no longer attach)."""
    name = f"rc-newer-{os.getpid()}"
    old = ringcast.MessageQueue(1, 1, name=name, max_chunk_bytes=4096, max_chunks=4)
    old.shutdown()
    new = ringcast.MessageQueue(1, 1, name=name, max_chunk_bytes=4096, max_chunks=4)
    del old
    gc.collect()
    reader = ringcast.MessageQueue.create_from_handle(new.export_handle(), 0)
    new.enqueue("still here", timeout=5)
    assert reader.dequeue(timeout=5) == "still here"
    reader.shutdown()
    new.shutdown()


def test_every_timeout_is_checked_even_where_nothing_waits():
    """wait_until_ready of a local reader and of a worker do not wait, yet a bad timeout is refused as
    by the blocking calls; a timed-out acquire_write names itself."""
    import math

    import ringcast.aio as aio
    q = ringcast.MessageQueue(1, 1, max_chunk_bytes=4096, max_chunks=4)
    r = ringcast.MessageQueue.create_from_handle(q.export_handle(), 0)
    g = ringcast.ReplyGather(1)
    w = ringcast.ReplyGather.create_from_handle(g.export_handle(), 0)
    for endpoint in (q, r, g, w):
        for bad, error in ((-1, ValueError), (math.nan, ValueError), ("1", TypeError)):
            with pytest.raises(error):
                endpoint.wait_until_ready(timeout=bad)
    for bad, error in ((math.nan, ValueError), ("1", TypeError)):
        with pytest.raises(error):
            asyncio.run(aio.dequeue(r, timeout=bad))
    with pytest.raises(TimeoutError, match="acquire_write timed out"):
        while True:
            with q.acquire_write(timeout=0, size=1000) as view:
                view[:1] = b"x"
    with pytest.raises(TimeoutError, match=r"\(timeout 0.05 s\)$"):  # the caller's, not the poll's 0
        asyncio.run(aio.collect(g, 5, timeout=0.05))
    w.close()
    g.close()
    r.shutdown()
    q.shutdown()


def test_a_timed_out_enqueue_names_the_reader_that_held_the_ring():
    """The writer waits for the slowest reader: a TimeoutError says which that was — its rank index and
    its rank of local_reader_ranks, as a PeerDeadError does (the index alone read as a rank)."""
    q = ringcast.MessageQueue(2, 2, max_chunk_bytes=4096, max_chunks=4, local_reader_ranks=[5, 6])
    fast = ringcast.MessageQueue.create_from_handle(q.export_handle(), 5)
    slow = ringcast.MessageQueue.create_from_handle(q.export_handle(), 6)
    with pytest.raises(TimeoutError, match=r"the slowest reader \(rank index 1, rank 6\) did not free ring space"):
        for i in range(10_000):
            q.enqueue(b"x" * 1000, timeout=0)
            assert fast.dequeue(timeout=0) == b"x" * 1000
    slow.shutdown()
    fast.shutdown()
    q.shutdown()


def test_acquire_write_and_read_refuse_a_bad_size_or_timeout_in_their_own_words():
    import numpy as np
    q = ringcast.MessageQueue(1, 1, max_chunk_bytes=4096, max_chunks=4)
    r = ringcast.MessageQueue.create_from_handle(q.export_handle(), 0)
    for bad, error, words in ((-1, ValueError, "size must be >= 0, got -1"), ("8", TypeError, "size must be an int"),
                              (2.0, TypeError, "size must be an int")):
        with pytest.raises(error, match=words):
            with q.acquire_write(timeout=0, size=bad):
                pass
    for bad, error in ((-1, ValueError), ("1", TypeError)):
        with pytest.raises(error, match="timeout"):
            with q.acquire_write(timeout=bad, size=8):
                pass
        with pytest.raises(error, match="timeout"):
            with r.acquire_read(timeout=bad):
                pass
    with q.acquire_write(timeout=0, size=np.int64(3)) as view:  # numpy's ints are ints
        view[:] = b"abc"
    with r.acquire_read(timeout=5) as view:
        assert bytes(view) == b"abc"
    r.shutdown()
    q.shutdown()


def _writer_gets_past(q, consumer, n=200):
    """Whether the writer can send n 1000-byte messages (more than the 64 KiB ring holds) while only
    `consumer` reads: it can unless another reader rank still holds it back."""
    try:
        for _ in range(n):
            q.enqueue(b"x" * 1000, timeout=0.2)
            assert consumer.dequeue(timeout=5) == b"x" * 1000
    except TimeoutError:
        return False
    return True


def test_a_reader_shutdown_gives_its_rank_back_at_once():
    """The writer stops waiting for a shut-down reader when shutdown() returns — not when the object
    is collected (it may be kept); a shutdown from another thread while a dequeue is blocked gives the
    rank back as that call leaves; a chunk of acquire_read keeps it until the chunk is released."""
    import threading
    q = ringcast.MessageQueue(3, 3, max_chunk_bytes=4096, max_chunks=4)
    r0, r1, r2 = (ringcast.MessageQueue.create_from_handle(q.export_handle(), i) for i in range(3))
    # 1. Kept alive, shut down: rank 1 and 2 hold the writer until they go.
    r2.shutdown()  # (rank 2 out of the way for the cases below)
    assert not _writer_gets_past(q, r0)  # rank 1 never reads: it holds the ring
    r1.shutdown()
    assert _writer_gets_past(q, r0)
    with pytest.raises(ringcast.ClosedError):
        r1.dequeue(timeout=0)
    assert r1._reader.waits >= 0 and r1._reader.rank == 1  # its properties still answer
    q.shutdown()
    r0.shutdown()

    # 2. Blocked in another thread when shut down: released as that call leaves.
    q = ringcast.MessageQueue(2, 2, max_chunk_bytes=4096, max_chunks=4)
    r0, r1 = (ringcast.MessageQueue.create_from_handle(q.export_handle(), i) for i in range(2))
    errors = []

    def blocked():
        try:
            r1.dequeue(timeout=10)
        except ringcast.ClosedError as e:
            errors.append(e)
    t = threading.Thread(target=blocked)
    t.start()
    time.sleep(0.2)
    r1.shutdown()
    t.join(10)
    assert len(errors) == 1
    assert _writer_gets_past(q, r0)
    q.shutdown()
    r0.shutdown()

    # 3. An acquire_read chunk out: the rank stays until the chunk is released (the writer would
    # overwrite the bytes under the view), then goes.
    q = ringcast.MessageQueue(2, 2, max_chunk_bytes=4096, max_chunks=4)
    r0, r1 = (ringcast.MessageQueue.create_from_handle(q.export_handle(), i) for i in range(2))
    with q.acquire_write(timeout=1, size=5) as view:
        view[:] = b"chunk"
    with r0.acquire_read(timeout=1) as view:
        assert bytes(view) == b"chunk"
    with pytest.raises(ringcast.ClosedError):
        with r1.acquire_read(timeout=1) as view:
            r1.shutdown()
            assert not _writer_gets_past(q, r0)  # still held: the view shows ring bytes
            assert bytes(view) == b"chunk"
    assert _writer_gets_past(q, r0)
    q.shutdown()
    r0.shutdown()


def test_a_forked_child_is_told_fork_even_while_a_parent_thread_was_inside_a_call():
    """The one-thread flag of a call in progress in the parent is copied by fork: the child's use of the
    inherited reader still says it is a copy through fork(), not 'in use by another thread'."""
    import threading
    q = ringcast.MessageQueue(1, 1, max_chunk_bytes=4096, max_chunks=4)
    r = ringcast.MessageQueue.create_from_handle(q.export_handle(), 0)
    t = threading.Thread(target=lambda: r.dequeue(timeout=5))
    t.start()
    time.sleep(0.2)  # the thread is inside dequeue
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            r.dequeue(timeout=0)
            os.write(wfd, b"no error")
        except Exception as e:  # noqa: BLE001 - the child reports whatever it got
            os.write(wfd, f"{type(e).__name__}: {e}".encode())
        os._exit(0)
    os.close(wfd)
    os.waitpid(pid, 0)
    said = os.read(rfd, 4096).decode()
    os.close(rfd)
    q.enqueue(b"x")
    t.join(10)
    assert "has a copy of it through fork()" in said, said
    r.shutdown()
    q.shutdown()


def test_a_bad_timeout_of_enqueue_or_dequeue_is_named_in_the_callers_terms(queue_pair):
    q, (r,) = queue_pair(1)
    for call in (lambda: q.enqueue("x", timeout="soon"), lambda: r.dequeue(timeout="soon")):
        with pytest.raises(TypeError, match="timeout must be a number of seconds or None, got str") as e:
            call()
        assert "incompatible function arguments" not in str(e.value)


# ---- views of an acquire_write / acquire_read chunk that outlive their with-block -------------------
# Every way of deriving a view from the block's memoryview: none of them is an export of that
# memoryview itself (a slice, memoryview(v) and a cast share its managed buffer; numpy.frombuffer
# keeps a memoryview of its own), so v.release() alone cannot see them.
_DERIVED_VIEWS = {
    "slice": lambda v: v[0:8],
    "memoryview": lambda v: memoryview(v),
    "cast": lambda v: memoryview(v).cast("B"),
    "toreadonly": lambda v: v.toreadonly(),
    "numpy.frombuffer": lambda v: np.frombuffer(v, np.uint8),
}


def _leak_queue():
    q = ringcast.MessageQueue(1, 1, max_chunk_bytes=4096, max_chunks=4)  # a 64 KiB ring: wraps fast
    return q, ringcast.MessageQueue.create_from_handle(q.export_handle(), 0)


@pytest.mark.parametrize("derive", list(_DERIVED_VIEWS), ids=list(_DERIVED_VIEWS))
def test_a_view_derived_from_an_acquire_write_view_that_outlives_the_block_raises_and_corrupts_nothing(derive):
    if derive == "numpy.frombuffer" and np is None:
        pytest.skip("numpy is not installed")
    q, r = _leak_queue()
    try:
        with pytest.raises(ringcast.RingcastError, match="outlived its with-block"):
            with q.acquire_write(timeout=1, size=8) as v:
                v[:] = b"leakleak"
                sub = _DERIVED_VIEWS[derive](v)
        # Withdrawn, not published; and no write may reuse the bytes under `sub` while it lives.
        with pytest.raises(TimeoutError):
            with r.acquire_read(timeout=0):
                pass
        with pytest.raises(ringcast.RingcastError, match="still alive"):
            q.enqueue(b"x" * 1000, timeout=1)
        with pytest.raises(ringcast.RingcastError, match="still alive"):
            with q.acquire_write(timeout=1, size=8):
                pass
        del sub
        # Released: the writer goes on, through many wraps of the ring, and nothing is corrupt.
        for i in range(300):
            with q.acquire_write(timeout=1, size=1000) as v:
                v[:] = bytes([i % 251]) * 1000
            q.enqueue(i, timeout=1)
            with r.acquire_read(timeout=1) as rv:
                assert bytes(rv) == bytes([i % 251]) * 1000
            assert r.dequeue(timeout=1) == i
    finally:
        r.shutdown()
        q.shutdown()


@pytest.mark.parametrize("derive", list(_DERIVED_VIEWS), ids=list(_DERIVED_VIEWS))
def test_a_view_derived_from_an_acquire_read_view_that_outlives_the_block_raises_and_keeps_its_bytes(derive):
    if derive == "numpy.frombuffer" and np is None:
        pytest.skip("numpy is not installed")
    q, r = _leak_queue()
    try:
        with q.acquire_write(timeout=1, size=8) as v:
            v[:] = b"chunk-01"
        with pytest.raises(ringcast.RingcastError, match="outlived its with-block"):
            with r.acquire_read(timeout=1) as rv:
                rsub = _DERIVED_VIEWS[derive](rv)
        # The chunk is kept: the writer cannot overwrite the bytes under `rsub`, the reader reads on
        # only once it is gone.
        sent = 0
        try:
            for _ in range(200):
                q.enqueue(b"y" * 1000, timeout=0.05)
                sent += 1
        except TimeoutError:
            pass
        assert sent < 200  # held back by the kept chunk
        assert bytes(rsub[0:8]) == b"chunk-01"
        with pytest.raises(ringcast.RingcastError, match="still alive"):
            r.dequeue(timeout=0)
        with pytest.raises(ringcast.RingcastError, match="still alive"):
            with r.acquire_read(timeout=0):
                pass
        del rsub
        for _ in range(sent):
            assert r.dequeue(timeout=1) == b"y" * 1000
        for i in range(300):
            q.enqueue(i, timeout=1)
            assert r.dequeue(timeout=1) == i
    finally:
        r.shutdown()
        q.shutdown()


def test_a_view_kept_past_the_block_keeps_the_ring_mapped():
    """A leaked view keeps the endpoint (and its mapping) alive: reading it after the queue object is
    dropped reads the chunk's bytes, not unmapped memory."""
    q, r = _leak_queue()
    with q.acquire_write(timeout=1, size=8) as v:
        v[:] = b"mappedok"
    with pytest.raises(ringcast.RingcastError, match="outlived its with-block"):
        with r.acquire_read(timeout=1) as rv:
            rsub = rv[0:8]
    r.shutdown()
    q.shutdown()
    del q, r, v, rv
    gc.collect()
    assert bytes(rsub) == b"mappedok"


def test_an_error_in_the_block_is_not_replaced_by_a_view_its_traceback_holds():
    """A helper called in the block held a slice when it raised: the slice lives on in the exception's
    traceback. The body's exception goes on as raised (it was replaced by RingcastError); the chunk is
    kept back all the same until the exception, and with it the view, is gone."""
    q, r = _leak_queue()

    def hold_and_raise(v):
        head = v[0:4]  # noqa: F841 -- alive in this frame, which the traceback keeps
        raise KeyError("the user's bug")

    try:
        for side in ("write", "read"):
            if side == "read":
                with q.acquire_write(timeout=1, size=8) as v:
                    v[:] = b"readside"
            try:
                if side == "write":
                    with q.acquire_write(timeout=1, size=8) as v:
                        hold_and_raise(v)
                else:
                    with r.acquire_read(timeout=1) as rv:
                        hold_and_raise(rv)
            except KeyError as e:
                assert "the user's bug" in str(e)
                with pytest.raises(ringcast.RingcastError, match="still alive"):
                    (q.enqueue(1, timeout=1) if side == "write" else r.dequeue(timeout=0))
            # the exception is gone, and the view with it: the endpoint goes on
            q.enqueue(side, timeout=1)
            assert r.dequeue(timeout=1) == side  # (read side: the kept chunk is released first)
    finally:
        r.shutdown()
        q.shutdown()


def test_a_view_that_outlives_a_block_during_which_the_queue_was_shut_down_stays_mapped():
    """shutdown() (from any thread) during an acquire_write block with a slice kept past it: the view
    is caught before the shut-down check, so it keeps the writer's mapping alive (the shut-down check
    came first: the view went uncounted, and reading it after the queue object went read unmapped
    memory)."""
    q, r = _leak_queue()
    with pytest.raises(ringcast.RingcastError, match="outlived its with-block"):
        with q.acquire_write(timeout=1, size=8) as v:
            v[:] = b"shutdown"
            sub = v[0:8]
            q.shutdown()
    r.shutdown()
    del q, r, v
    gc.collect()
    assert bytes(sub) == b"shutdown"


def test_the_chunk_object_behind_a_view_refuses_buffers_after_its_block():
    """The block's memoryview shows a chunk object (its .obj); kept past the block it holds no view,
    and a buffer taken of it later would map ring bytes that are another message's, or memory unmapped
    with the queue (a segfault): it refuses."""
    q, r = _leak_queue()
    with q.acquire_write(timeout=1, size=8) as v:
        v[:] = b"obj-kept"
        wchunk = v.obj
    with r.acquire_read(timeout=1) as rv:
        rchunk = rv.obj
    for chunk in (wchunk, rchunk):
        with pytest.raises(BufferError, match="ended with its with-block"):
            memoryview(chunk)
    r.shutdown()
    q.shutdown()
    del q, r
    gc.collect()
    with pytest.raises(BufferError):
        memoryview(wchunk)


def test_create_from_handle_takes_a_numpy_integer_rank():
    if np is None:
        pytest.skip("numpy is not installed")
    q = ringcast.MessageQueue(2, 2, max_chunk_bytes=4096, max_chunks=4)
    r = ringcast.MessageQueue.create_from_handle(q.export_handle(), np.int64(1))
    try:
        assert r.local_reader_rank == 1 and type(r.local_reader_rank) is int
        q.enqueue("x", timeout=1)
        assert r.dequeue(timeout=1) == "x"
        with pytest.raises(TypeError, match="rank must be an int, got bool"):  # numpy 2 names it bool, 1.x bool_
            ringcast.MessageQueue.create_from_handle(q.export_handle(), np.bool_(True))
    finally:
        r.shutdown()
        q.shutdown()


def test_a_bool_is_not_a_timeout(queue_pair):
    q, (r,) = queue_pair(1)
    calls = {
        "enqueue": lambda t: q.enqueue("x", timeout=t),
        "dequeue": lambda t: r.dequeue(timeout=t),
        "dequeue_many": lambda t: r.dequeue_many(2, timeout=t),
        "wait_until_ready": lambda t: q.wait_until_ready(timeout=t),
    }
    for name, call in calls.items():
        for flag in (True, False):
            with pytest.raises(TypeError, match="timeout must be a number of seconds or None, got bool"):
                call(flag)
    with pytest.raises(TypeError, match="got bool"):
        with q.acquire_write(timeout=True, size=8):
            pass
    # Every other kind of timeout still goes: an int, a float, numpy's numbers, None.
    for t in (1, 1.5, np.float64(1.0) if np is not None else 1.0, np.int64(1) if np is not None else 1, None):
        q.enqueue(t, timeout=t)
        assert r.dequeue(timeout=t) == t


def test_a_rank_that_is_no_reader_names_the_remote_ranks_too():
    if not getattr(ringcast._core, "HAVE_REMOTE", False):
        pytest.skip("ringcast built without ZeroMQ (remote readers)")
    q = ringcast.MessageQueue(4, 2, max_chunk_bytes=4096, max_chunks=4, connect_ip="127.0.0.1")
    try:
        h = q.export_handle()
        assert h.remote_reader_ranks == [2, 3]
        with pytest.raises(ValueError) as e:
            ringcast.MessageQueue.create_from_handle(h, 7)
        said = str(e.value)
        assert "local_reader_ranks=[0, 1]" in said and "remote_reader_ranks=[2, 3]" in said, said
        assert "ZeroMQ" in said and str(h.remote_subscribe_addr) in said, said
    finally:
        q.shutdown()
    q = ringcast.MessageQueue(2, 2, max_chunk_bytes=4096, max_chunks=4)
    try:
        with pytest.raises(ValueError, match=r"local_reader_ranks=\[0, 1\]; the queue has no remote readers"):
            ringcast.MessageQueue.create_from_handle(q.export_handle(), 7)
    finally:
        q.shutdown()


def test_reattaching_a_released_rank_gives_python_advice_not_the_cpp_keep_place():
    q = ringcast.MessageQueue(1, 1, max_chunk_bytes=4096, max_chunks=4)
    try:
        h = q.export_handle()
        ringcast.MessageQueue.create_from_handle(h, 0).shutdown()
        with pytest.raises(ValueError, match="released by a clean detach") as e:
            ringcast.MessageQueue.create_from_handle(h, 0)
        said = str(e.value)
        assert "sets keep_place" not in said, said
        assert "Python has no keep_place" in said and "new handle" in said, said
    finally:
        q.shutdown()


def test_a_shutdown_from_another_thread_ends_the_writers_wait_until_ready():
    """wait_until_ready polled for unattached readers only: a shutdown() meanwhile left it waiting
    forever (no timeout), or ending in TimeoutError; it raises ClosedError now, as a blocked enqueue does."""
    import threading
    q = ringcast.MessageQueue(2, 2, max_chunk_bytes=1024, max_chunks=4)
    r = ringcast.MessageQueue.create_from_handle(q.export_handle(), 0)  # rank 1 never attaches
    threading.Timer(0.2, q.shutdown).start()
    t0 = time.monotonic()
    with pytest.raises(ringcast.ClosedError, match="shut down"):
        q.wait_until_ready(timeout=30)
    assert time.monotonic() - t0 < 10
    r.shutdown()


@pytest.mark.parametrize("bad,error", [(float("nan"), ValueError), (None, TypeError), ("x", TypeError), (True, TypeError)])
def test_a_bad_oob_threshold_is_refused_before_anything_is_made(bad, error):
    """Refused up front, naming the argument (it was judged after the segment existed: the name stayed
    in /dev/shm while the exception lived, with "cannot convert float NaN to integer")."""
    name = f"ringcast-test-oob-{os.getpid()}"
    with pytest.raises(error, match="oob_threshold"):
        ringcast.MessageQueue(1, 1, max_chunk_bytes=1024, max_chunks=4, name=name, oob_threshold=bad)
    assert not os.path.exists(f"/dev/shm/{name}")


def test_an_interrupt_as_acquire_write_reserved_its_chunk_leaves_the_writer_usable():
    """A signal handler's exception (KeyboardInterrupt) raised as reserve_raw returned, before
    acquire_write's with-block began: the reservation had no block to end it, and every later write
    was refused ("an acquire_write() block of this queue is open") for good. Emulated at the same point
    (a profile hook raising at the call's return, where CPython runs pending signal handlers): the
    reservation is withdrawn at the next write, and the writer goes on."""
    import sys
    q = ringcast.MessageQueue(1, 1, sweep_abandoned=False)
    r = ringcast.MessageQueue.create_from_handle(q.export_handle(), 0)
    try:
        def interrupt_at_return(frame, event, arg):
            if event == "c_return" and getattr(arg, "__name__", "") == "reserve_raw":
                sys.setprofile(None)
                raise KeyboardInterrupt("as reserve_raw returned")

        sys.setprofile(interrupt_at_return)
        try:
            with pytest.raises(KeyboardInterrupt):
                with q.acquire_write(size=16) as view:
                    view[:2] = b"no"
        finally:
            sys.setprofile(None)
        q.enqueue("next", timeout=5)
        with q.acquire_write(size=2) as view:
            view[:2] = b"ok"
        assert r.dequeue(timeout=5) == "next"
        with r.acquire_read(timeout=5) as view:
            assert bytes(view) == b"ok"
        with pytest.raises(ringcast.RingcastError, match="an acquire_write"):  # an open block still refuses
            with q.acquire_write(size=2) as view:
                q.enqueue("inside", timeout=1)
    finally:
        r.shutdown()
        q.shutdown()
