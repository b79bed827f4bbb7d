"""What a dequeue_many took off the ring and serves from Python (its burst, and what a message that failed
to unpickle left for later reads) keeps the one-thread rule of every other reader call: a second thread
is refused with RuntimeError, and no message is served twice or lost. Also the documented rule of the
type a bytes-like message comes back as (docs/python.md, "Bytes-like messages")."""
import array
import pickle
import threading

import pytest

import ringcast
from _workers import np

_IN_USE = "already in use by another thread"


# ---- a message whose unpickling waits, at a point the test chooses --------------------------------
class _Gate:
    """Armed, the next unpickling of a _Gated message signals `entered` and waits for `go`."""

    def __init__(self):
        self.armed = False
        self.entered = threading.Event()
        self.go = threading.Event()


_GATE = _Gate()


def _rebuilt_at_the_gate(value):
    gate = _GATE
    if gate.armed:
        gate.armed = False
        gate.entered.set()
        if not gate.go.wait(30):
            raise TimeoutError("the test never opened the gate")
    return value


class _Gated:
    def __init__(self, value):
        self.value = value

    def __reduce__(self):
        return (_rebuilt_at_the_gate, (self.value,))


def _unpickling_fails():
    raise ValueError("this message cannot be unpickled")


class _FailsToUnpickle:
    def __reduce__(self):
        return (_unpickling_fails, ())


@pytest.fixture
def gate():
    global _GATE
    _GATE = _Gate()
    yield _GATE
    _GATE.armed = False
    _GATE.go.set()  # never leave a thread waiting


def _outcome(call):
    try:
        return ("ok", call())
    except BaseException as e:  # noqa: BLE001 (the test compares what happened)
        return (type(e).__name__, str(e))


def _start(call):
    """Runs `call` in a thread; returns (thread, list that receives its outcome)."""
    out = []
    t = threading.Thread(target=lambda: out.append(_outcome(call)), daemon=True)
    t.start()
    return t, out


def _refused(outcome):
    return outcome[0] == "RuntimeError" and _IN_USE in outcome[1]


def _acquire_read_now(r):
    def call():
        with r.acquire_read(timeout=0):
            pass
    return call


def _second_thread_while_a_unpickles(r, gate, call_a):
    """Thread A runs `call_a` until it stops inside a _Gated message's unpickling; meanwhile this
    thread's dequeue(), dequeue_many() and acquire_read() must all be refused as a second thread's
    calls (RuntimeError). Then A goes on: returns A's outcome."""
    gate.armed = True
    a, a_out = _start(call_a)
    assert gate.entered.wait(30), "thread A never reached the unpickling"
    second = [_outcome(lambda: r.dequeue(timeout=0)), _outcome(lambda: r.dequeue_many(10, timeout=0)),
              _outcome(_acquire_read_now(r))]
    gate.go.set()
    a.join(30)
    assert not a.is_alive()
    assert all(_refused(o) for o in second), second
    return a_out


# ---- Task: leftovers obey the one-thread rule --------------------------------------------------
def test_leftovers_of_a_failed_unpickling_are_refused_to_a_second_thread_and_never_served_twice(queue_pair, gate):
    """A message that fails to unpickle ends a dequeue_many's burst and leaves the rest for later reads.
    While one thread's dequeue() serves such a leftover (here: held inside its unpickling), a second
    thread's dequeue() and dequeue_many() are refused as every reader call refuses a second thread —
    they used to take the same leftover again (served twice) and the first thread's bookkeeping then
    removed another message (lost)."""
    q, (r,) = queue_pair(1)
    for m in ("m1", _FailsToUnpickle(), _Gated("m3"), "m4", "m5"):
        q.enqueue(m, timeout=5)
    assert r.dequeue_many(10, timeout=5) == ["m1"]
    with pytest.raises(ValueError, match="cannot be unpickled"):
        r.dequeue(timeout=5)
    # Left: m3, m4, m5 (not yet unpickled). Thread A's dequeue() stops inside m3's unpickling.
    assert _second_thread_while_a_unpickles(r, gate, lambda: r.dequeue(timeout=5)) == [("ok", "m3")]
    # Nothing lost, nothing twice, in order.
    assert r.dequeue(timeout=5) == "m4"
    assert r.dequeue_many(10, timeout=5) == ["m5"]
    with pytest.raises(TimeoutError):
        r.dequeue(timeout=0)


def test_a_burst_being_unpickled_is_refused_to_a_second_thread(queue_pair, gate):
    """dequeue_many unpickles its burst after the ring call: until it returns, the rest of the burst
    waits in Python. A second thread's dequeue()/dequeue_many() meanwhile is refused (RuntimeError),
    not served a message of that burst (which the first thread then returned as well)."""
    q, (r,) = queue_pair(1)
    for m in (_Gated("a"), "b", "c"):
        q.enqueue(m, timeout=5)
    assert _second_thread_while_a_unpickles(r, gate, lambda: r.dequeue_many(10, timeout=5)) == [("ok", ["a", "b", "c"])]
    with pytest.raises(TimeoutError):
        r.dequeue(timeout=0)


def test_a_burst_of_one_message_being_unpickled_is_refused_to_a_second_thread(queue_pair, gate):
    """The same for a burst of one message (the shorter path most calls take): nothing else of it waits
    in Python, yet the reader is in use until the call returns."""
    q, (r,) = queue_pair(1)
    q.enqueue(_Gated("a"), timeout=5)
    assert _second_thread_while_a_unpickles(r, gate, lambda: r.dequeue_many(10, timeout=5)) == [("ok", ["a"])]
    with pytest.raises(TimeoutError):
        r.dequeue(timeout=0)


def test_the_guard_is_released_after_every_way_of_serving_leftovers(queue_pair):
    """Returning, raising an unpickling error and a KeyboardInterrupt all give the endpoint back: the
    next call, from another thread too, is served."""
    q, (r,) = queue_pair(1)
    for m in ("x", _FailsToUnpickle(), "y", _FailsToUnpickle(), "z"):
        q.enqueue(m, timeout=5)
    assert r.dequeue_many(10, timeout=5) == ["x"]
    t, out = _start(lambda: r.dequeue(timeout=5))
    t.join(30)
    assert out[0][0] == "ValueError"
    t, out = _start(lambda: r.dequeue_many(10, timeout=5))
    t.join(30)
    assert out == [("ok", ["y"])]
    with pytest.raises(ValueError):
        r.dequeue_many(10, timeout=5)
    assert r.dequeue(timeout=5) == "z"
    # A shut-down reader says so first, leftovers or not.
    for m in ("p", _FailsToUnpickle(), "s"):
        q.enqueue(m, timeout=5)
    assert r.dequeue_many(10, timeout=5) == ["p"]
    r.shutdown()
    with pytest.raises(ringcast.ClosedError):
        r.dequeue(timeout=0)


def test_unpickling_code_that_reads_the_same_queue_is_refused_not_recursing(queue_pair):
    """Code run while a dequeue_many's burst is unpickled must not read the same reader: RuntimeError
    says so (as for ReplyGather's early unpickling), where the read used to unpickle the same message
    again, recursing until RecursionError."""
    q, (r,) = queue_pair(1)
    _REENTER.append(r)
    try:
        q.enqueue(_Reenters(), timeout=5)
        q.enqueue("after", timeout=5)
        got = r.dequeue_many(10, timeout=5)
    finally:
        _REENTER.clear()
    assert got[0][0] == "RuntimeError" and _IN_USE in got[0][1], got
    assert got[1:] == ["after"]


def test_unpickling_code_of_a_one_message_burst_that_reads_the_same_queue_is_refused(queue_pair):
    """As above for a burst of one message: the read inside its unpickling is refused, not served the
    next message out of turn."""
    q, (r,) = queue_pair(1)
    _REENTER.append(r)
    try:
        q.enqueue(_Reenters(), timeout=5)
        got = r.dequeue_many(10, timeout=5)
        q.enqueue("after", timeout=5)
    finally:
        _REENTER.clear()
    assert len(got) == 1 and got[0][0] == "RuntimeError" and _IN_USE in got[0][1], got
    assert r.dequeue(timeout=5) == "after"


_REENTER: list = []


def _rebuilt_reading_the_queue():
    return _outcome(lambda: _REENTER[0].dequeue(timeout=0)) if _REENTER else None


class _Reenters:
    def __reduce__(self):
        return (_rebuilt_reading_the_queue, ())


# ---- the type a bytes-like message comes back as (docs/python.md, "Bytes-like messages") --------
def _read_only_array(n):
    a = np.zeros(n, np.uint8)
    a.setflags(write=False)
    return a


# (what is sent, made for n bytes; what comes back below oob_threshold; at or above it). The doc's table,
# row by row. "ro-memoryview" (a read-only memoryview, format 'B', 1-D, over a bytearray) is what a
# read-only buffer came back as at or above the threshold until such parts were rebuilt as bytes: the
# classifier keeps naming it, so a return of it fails by name.
_BYTES_LIKE = [
    ("bytes", lambda n: b"b" * n, "bytes", "bytes"),
    ("bytearray", lambda n: bytearray(b"a" * n), "bytearray", "bytearray"),
    ("memoryview(bytearray)", lambda n: memoryview(bytearray(b"w" * n)), "bytearray", "bytearray"),
    ("memoryview(array.array)", lambda n: memoryview(array.array("b", b"y" * n)), "bytearray", "bytearray"),
    ("memoryview(bytes)", lambda n: memoryview(b"m" * n), "bytes", "bytes"),
    ("memoryview(bytes)[1:]", lambda n: memoryview(b"s" * (n + 1))[1:], "bytes", "bytes"),
    ("memoryview(bytes).cast('i')", lambda n: memoryview(b"i" * n).cast("i"), "bytes", "bytes"),
    ("PickleBuffer(bytes)", lambda n: pickle.PickleBuffer(b"p" * n), "bytes", "bytes"),
    ("PickleBuffer(bytearray)", lambda n: pickle.PickleBuffer(bytearray(b"q" * n)), "bytearray", "bytearray"),
    ("PickleBuffer(memoryview(bytes))", lambda n: pickle.PickleBuffer(memoryview(b"r" * n)), "bytes", "bytes"),
]
if np is not None:
    _BYTES_LIKE += [
        ("memoryview(numpy writable)", lambda n: memoryview(np.full(n, 7, np.uint8)), "bytearray", "bytearray"),
        ("memoryview(numpy read-only)", lambda n: memoryview(_read_only_array(n)), "bytes", "bytes"),
    ]


def _kind(obj):
    if type(obj) is memoryview:
        assert obj.readonly and obj.format == "B" and obj.ndim == 1 and type(obj.obj) is bytearray, obj
        return "ro-memoryview"
    return type(obj).__name__


def _sent_bytes(obj):
    return memoryview(obj).tobytes()  # a PickleBuffer too


class _PickledInPython(ringcast.MessageQueue):
    """A subclass with its own _pickle: enqueue pickles in Python (ringcast._pickling), not in the binding."""
    _pickle = staticmethod(lambda obj, callback: pickle.dumps(obj, protocol=5, buffer_callback=callback))


@pytest.mark.parametrize("threshold", [None, 100])
@pytest.mark.parametrize("path", ["binding", "python"])
def test_bytes_like_messages_come_back_as_documented(queue_pair, threshold, path):
    kw = {} if threshold is None else {"oob_threshold": threshold}
    limit = ringcast.OOB_THRESHOLD if threshold is None else threshold
    if path == "python":
        q = _PickledInPython(1, 1, max_chunk_bytes=512 * 1024, max_chunks=8, **kw)
        r = ringcast.MessageQueue.create_from_handle(q.export_handle(), 0)
    else:
        q, (r,) = queue_pair(1, **kw)
    try:
        for name, make, below, at_or_above in _BYTES_LIKE:
            for n, want in ((limit - 4, below), (limit, at_or_above), (limit + 4000, at_or_above)):
                sent = make(n)
                assert memoryview(sent).nbytes == n
                got = []
                for read in (lambda: r.dequeue(timeout=5), lambda: r.dequeue_many(4, timeout=5)[0]):
                    q.enqueue(sent, timeout=5)
                    got.append(read())
                for g in got:
                    assert (_kind(g), bytes(g)) == (want, _sent_bytes(sent)), (name, n)
    finally:
        if path == "python":
            r.shutdown()
            q.shutdown()


def test_bytes_like_messages_through_dequeue_async(queue_pair):
    import asyncio
    q, (r,) = queue_pair(1)
    for name, make, below, at_or_above in _BYTES_LIKE:
        for n, want in ((100, below), (ringcast.OOB_THRESHOLD, at_or_above)):
            q.enqueue(make(n), timeout=5)
            assert _kind(asyncio.run(r.dequeue_async(timeout=5))) == want, (name, n)


@pytest.mark.skipif(not getattr(ringcast._core, "HAVE_REMOTE", False), reason="built without ZeroMQ")
def test_bytes_like_messages_reach_a_remote_reader_as_a_local_one():
    q = ringcast.MessageQueue(2, 1, connect_ip="127.0.0.1", max_chunk_bytes=64 * 1024, max_chunks=4)
    handle = q.export_handle()
    local = ringcast.MessageQueue.create_from_handle(handle, 0)
    remote = ringcast.MessageQueue.create_from_handle(handle, 1)
    try:
        q.wait_until_ready(30)
        remote.wait_until_ready(30)
        for name, make, below, at_or_above in _BYTES_LIKE:
            for n, want in ((100, below), (ringcast.OOB_THRESHOLD, at_or_above)):
                q.enqueue(make(n), timeout=10)
                assert _kind(local.dequeue(timeout=10)) == want, (name, n)
                assert _kind(remote.dequeue(timeout=10)) == want, (name, n)
    finally:
        remote.shutdown()
        local.shutdown()
        q.shutdown()


def test_what_a_bytes_like_message_cannot_be(queue_pair):
    """A non-contiguous memoryview is refused by pickle (nothing sent); inside a container bytes and
    bytearray keep their type at any size and a memoryview cannot be pickled at all."""
    q, (r,) = queue_pair(1)
    with pytest.raises(pickle.PicklingError, match="non-contiguous"):
        q.enqueue(memoryview(b"x" * 10_000)[::2], timeout=5)
    with pytest.raises(TypeError, match="memoryview"):
        q.enqueue([memoryview(b"x")], timeout=5)
    big = ringcast.OOB_THRESHOLD * 2
    q.enqueue([b"s" * 10, b"b" * big, bytearray(10), bytearray(big)], timeout=5)
    assert [type(x) for x in r.dequeue(timeout=5)] == [bytes, bytes, bytearray, bytearray]
    with pytest.raises(TimeoutError):
        r.dequeue(timeout=0)  # the refused ones sent nothing
