"""The one-call paths (Writer.send_object, Reader.recv_object, GatherWorker.reply_object,
GatherCollector.collect_objects): pickling inside the binding keeps the wire format, the out-of-band
rule, and what happens to a message whose pickling or unpickling fails."""
import enum
import functools
import gc
import os
import pickle
import signal
import threading
import time
import weakref
from decimal import Decimal
from fractions import Fraction

import pytest

import ringcast
from ringcast import _core
from ringcast._pickling import dumps_out_of_band
from _workers import EnqueuesWhilePickled, np


@pytest.fixture(autouse=True)
def plain_pickling(monkeypatch):
    """These tests are of the plain pickling (pickle.dumps inside the binding), whatever this process
    imported before them: with torch loaded (a GPU test before), send_object would pickle with the
    device pickler (its tests: test_gpu.py). Queues made here look for no GPU library."""
    from ringcast import _gpu
    monkeypatch.setattr(_gpu, "DEVICE_ARRAY_LIBRARIES", ())


@pytest.fixture
def gather_pair():
    """A ReplyGather of n ranks and its n workers (all in this process); closed afterwards."""
    made = []

    def make(n=1):
        g = ringcast.ReplyGather(n)
        made.append(g)
        return g, [ringcast.ReplyGather.create_from_handle(g.export_handle(), r) for r in range(n)]

    yield make
    for g in made:
        g.close()


def _refuse_to_load(why):
    raise RuntimeError(why)


class LoadsBadly:
    """Pickles fine; unpickling it raises (as a class missing in the reader's process would)."""

    def __reduce__(self):
        return (_refuse_to_load, ("rebuilt nowhere",))


def _dequeue_while_unpickled(tag):
    return (tag, _READER[0].dequeue(timeout=5))


_READER = [None]


class DequeuesWhileUnpickled:
    """Unpickling it dequeues the next message from the reader it came from."""

    def __reduce__(self):
        return (_dequeue_while_unpickled, ("outer",))


def _enqueue_while_unpickled(n):
    _WRITER[0].enqueue(b"y" * 12_000, timeout=1)  # needs the room of the record it came in
    return n


_WRITER = [None]


class EnqueuesWhileUnpickled:
    def __reduce__(self):
        return (_enqueue_while_unpickled, (14_000,))


def test_either_path_reads_what_the_other_wrote(queue_pair):
    q, (r,) = queue_pair(1)
    obj = {"step": 3, "ids": list(range(50))}
    q._writer.send([pickle.dumps(obj, protocol=5)], 5)  # the general writer path
    assert r._reader.recv_object(5) == obj
    q._writer.send_object(obj, 5)  # the one-call writer path
    parts = r._reader.recv(5)
    assert parts == [pickle.dumps(obj, protocol=5)] and type(parts[0]) is bytes  # the same wire: one bytes part
    q._writer.send([bytearray(pickle.dumps(obj, protocol=5))], 5)  # a one-part message that is no bytes
    assert r._reader.recv_object(5) == obj


@pytest.mark.skipif(np is None, reason="numpy absent")
def test_out_of_band_parts_come_back_as_a_multipart_message(queue_pair):
    q, (r,) = queue_pair(1)
    # (a nested bytes goes out of band only when wrapped: the C pickler writes bytes in-band)
    obj = {"a": np.arange(5000), "b": [np.ones(3000), pickle.PickleBuffer(b"x" * 10_000)], "small": np.arange(3)}
    q._writer.send_object(obj, 5)
    got = r._reader.recv_object(5)
    assert type(got) is _core.MultipartMessage
    expected = dumps_out_of_band(obj, ringcast._queue.OOB_THRESHOLD, q._max_parts - 1)
    assert [bytes(p) for p in got.parts] == [bytes(p) for p in expected]
    assert len(got.parts) == 4  # the pickle and the three buffers of >= 4096 bytes
    assert type(got.parts[3]) is bytes  # a whole bytes object travels as itself


@pytest.mark.skipif(np is None, reason="numpy absent")
def test_the_out_of_band_limit_keeps_further_buffers_in_the_pickle(queue_pair):
    q, (r,) = queue_pair(1)
    q._writer.set_out_of_band(4096, 2)
    arrays = [np.full(2000, i) for i in range(4)]
    q._writer.send_object(arrays, 5)
    parts = r._reader.recv(5)
    assert len(parts) == 3  # the pickle, then the first two arrays; the other two stayed in-band
    rebuilt = pickle.loads(parts[0], buffers=parts[1:])
    assert all((a == b).all() for a, b in zip(arrays, rebuilt))
    q._writer.set_out_of_band(10**9, 100)  # no buffer reaches the threshold: one part
    q._writer.send_object(arrays, 5)
    assert len(r._reader.recv(5)) == 1


@pytest.mark.parametrize("size", [100, 300_000])  # one record; several records (a 64 KiB ring)
def test_a_message_that_cannot_be_unpickled_is_consumed_and_the_next_arrives(queue_pair, size):
    q, (r,) = queue_pair(1, max_chunk_bytes=16 * 1024, max_chunks=4)
    import threading
    t = threading.Thread(target=lambda: [q.enqueue([LoadsBadly(), "p" * size], timeout=10),
                                         q.enqueue("next", timeout=10)])
    t.start()
    with pytest.raises(RuntimeError, match="rebuilt nowhere"):
        r.dequeue(timeout=10)
    assert r.dequeue(timeout=10) == "next"
    t.join()
    with pytest.raises(TimeoutError):
        r.dequeue(timeout=0)


def test_an_object_that_cannot_be_pickled_sends_nothing(queue_pair):
    q, (r,) = queue_pair(1)
    with pytest.raises((pickle.PicklingError, AttributeError, TypeError)):
        q.enqueue({"f": lambda: 0}, timeout=5)
    with pytest.raises(TimeoutError):
        r.dequeue(timeout=0)
    q.enqueue("after", timeout=5)
    assert r.dequeue(timeout=5) == "after"


@pytest.mark.skipif(np is None, reason="numpy absent")
def test_pickling_that_enqueues_keeps_each_messages_out_of_band_buffers(queue_pair):
    # The out-of-band state is the pickling thread's: the inner enqueue must use its own and the
    # outer pickle get its own back (its array, pickled after the inner call returned, leaves it).
    q, (r,) = queue_pair(1)
    q2, (r2,) = queue_pair(1)
    inner, outer_array = np.arange(6000), np.arange(7000) * 2
    q._writer.send_object([EnqueuesWhilePickled(q2, {"inner": inner}), outer_array], 5)
    got_inner = r2._reader.recv_object(5)
    assert type(got_inner) is _core.MultipartMessage and len(got_inner.parts) == 2
    got_outer = r._reader.recv_object(5)
    assert type(got_outer) is _core.MultipartMessage and len(got_outer.parts) == 2
    outer = pickle.loads(got_outer.parts[0], buffers=got_outer.parts[1:])
    assert outer[0] == "outer" and (outer[1] == outer_array).all()


def test_pickling_that_enqueues_on_the_same_queue_sends_that_message_first(queue_pair):
    q, (r,) = queue_pair(1)
    q.enqueue([EnqueuesWhilePickled(q, "first"), "second"], timeout=5)
    assert r.dequeue(timeout=5) == "first"
    assert r.dequeue(timeout=5) == ["outer", "second"]


def test_received_objects_do_not_point_into_the_ring(queue_pair):
    # recv_object unpickles straight from the ring record; what it returns must own its memory.
    q, (r,) = queue_pair(1, max_chunk_bytes=16 * 1024, max_chunks=4)
    sent = {"b": b"abc" * 300, "ba": bytearray(b"def" * 300), "s": "ghi" * 300}
    q.enqueue(sent, timeout=5)
    got = r.dequeue(timeout=5)
    for i in range(200):  # wraps the 64 KiB ring many times over the first record's bytes
        q.enqueue({"b": bytes([i % 256]) * 900, "ba": bytearray(900), "s": "x" * 900}, timeout=5)
        r.dequeue(timeout=5)
    assert got == sent


def test_the_one_call_paths_pickle_with_the_functions_set_for_benchmarks(queue_pair, gather_pair):
    calls = []

    def dumps(*args, **kwargs):
        calls.append("dumps")
        return pickle.dumps(*args, **kwargs)

    def loads(*args, **kwargs):
        calls.append("loads")
        return pickle.loads(*args, **kwargs)

    q, (r,) = queue_pair(1)
    g, (w,) = gather_pair(1)
    _core._set_pickle_functions(dumps, loads)
    try:
        q.enqueue({"a": 1}, timeout=5)
        assert r.dequeue(timeout=5) == {"a": 1}
        w.reply(1, "r", timeout=5)
        assert g.collect(1, timeout=5) == ["r"]
    finally:
        _core._set_pickle_functions(pickle.dumps, pickle.loads)
    assert calls == ["dumps", "loads", "dumps", "loads"]


def test_a_reply_that_cannot_be_unpickled_fails_its_collect_only(gather_pair):
    g, ws = gather_pair(2)
    ws[0].reply(1, LoadsBadly(), timeout=5)
    ws[1].reply(1, "fine", timeout=5)
    with pytest.raises(RuntimeError, match="rebuilt nowhere"):
        g.collect(1, timeout=5)
    ws[0].reply(2, "a", timeout=5)
    ws[1].reply(2, "b", timeout=5)
    assert g.collect(2, timeout=5) == ["a", "b"]
    ws[0].reply(3, LoadsBadly(), timeout=5)
    ws[1].reply(3, "c", timeout=5)
    with pytest.raises(RuntimeError, match="rebuilt nowhere"):
        g.collect_async(3, timeout=5).result()


def test_a_reply_that_cannot_be_pickled_sends_nothing(gather_pair):
    g, (w,) = gather_pair(1)
    with pytest.raises((pickle.PicklingError, AttributeError, TypeError)):
        w.reply(1, lambda: 0, timeout=5)
    with pytest.raises(TimeoutError):
        g.collect(1, timeout=0)
    w.reply(1, "after", timeout=5)
    assert g.collect(1, timeout=5) == ["after"]


def test_unpickling_may_dequeue_from_the_same_reader(queue_pair):
    # The message is taken and this reader free again before its unpickling runs (as recv() + pickle.loads).
    q, (r,) = queue_pair(1)
    _READER[0] = r
    try:
        q.enqueue(DequeuesWhileUnpickled(), timeout=5)
        q.enqueue("inner", timeout=5)
        assert r.dequeue(timeout=5) == ("outer", "inner")
        with pytest.raises(TimeoutError):
            r.dequeue(timeout=0)
    finally:
        _READER[0] = None


def test_unpickling_may_enqueue_on_a_full_ring_behind_its_own_record(queue_pair):
    # A 64 KiB ring filled behind the message: its unpickling can enqueue only once its record is freed.
    q, (r,) = queue_pair(1, max_chunk_bytes=16 * 1024, max_chunks=4)
    _WRITER[0] = q
    try:
        q.enqueue([EnqueuesWhileUnpickled(), "p" * 14_000], timeout=5)
        with pytest.raises(TimeoutError):
            while True:
                q.enqueue(b"z" * 12_000, timeout=0.05)
        assert r.dequeue(timeout=5) == [14_000, "p" * 14_000]
    finally:
        _WRITER[0] = None


def test_an_empty_reply_fails_to_unpickle_as_pickle_says(gather_pair):
    g, (w,) = gather_pair(1)
    w._worker.reply(1, b"", 5)
    with pytest.raises(EOFError):
        g.collect(1, timeout=5)
    w.reply(2, "after", timeout=5)
    assert g.collect(2, timeout=5) == ["after"]


def test_a_stand_in_dumps_that_returns_no_bytes_is_refused(queue_pair):
    q, (r,) = queue_pair(1)
    _core._set_pickle_functions(lambda *a, **k: bytearray(pickle.dumps(*a, **k)), pickle.loads)
    try:
        with pytest.raises(TypeError, match="not bytes"):
            q.enqueue({"a": 1}, timeout=5)
    finally:
        _core._set_pickle_functions(pickle.dumps, pickle.loads)
    with pytest.raises(TimeoutError):
        r.dequeue(timeout=0)


@pytest.mark.skipif(np is None, reason="numpy absent")
@pytest.mark.parametrize("threshold, out_of_band", [(-1, 2), (0, 2), (8000.5, 1), (8001, 1), (8002, 0),
                                                     (float("inf"), 0), (10**30, 0)])
def test_any_threshold_the_python_rule_takes_gives_the_same_parts(queue_pair, threshold, out_of_band):
    # 8001 and 8000-byte arrays: `nbytes < threshold` keeps a buffer in the pickle, in both implementations.
    q, (r,) = queue_pair(1, oob_threshold=threshold)
    obj = [np.zeros(8001, dtype=np.uint8), np.zeros(1000, dtype=np.float64)]
    q.enqueue(obj, timeout=5)
    parts = r._reader.recv(5)
    assert len(parts) == 1 + out_of_band
    assert len(dumps_out_of_band(obj, threshold, 100)) == 1 + out_of_band


def test_the_benchmark_stamps_follow_each_call_in_order_and_stay_off_by_default(queue_pair, gather_pair):
    q, (r,) = queue_pair(1)
    g, (w,) = gather_pair(1)
    names = _core._STAMP_NAMES
    _core._stamps_take()
    q.enqueue({"a": 1}, timeout=5)
    r.dequeue(timeout=5)
    assert set(_core._stamps_take()) == {0}, "stamps are off unless enabled"
    _core._stamps_enable(True)
    try:
        q.enqueue({"a": 1}, timeout=5)
        assert r.dequeue(timeout=5) == {"a": 1}
        w.reply(1, "r", timeout=5)
        assert g.collect(1, timeout=5) == ["r"]
        stamps = dict(zip(names, _core._stamps_take()))
    finally:
        _core._stamps_enable(False)
    order = ["send_enter", "send_pickled", "send_committed", "recv_enter", "recv_seen", "recv_copied",
             "recv_unpickled", "reply_enter", "reply_pickled", "reply_committed", "collect_enter",
             "collect_all_in", "collect_unpickled"]
    assert sorted(names) == sorted(order)
    assert all(stamps[n] > 0 for n in order), stamps
    assert [stamps[n] for n in order] == sorted(stamps[n] for n in order), stamps
    assert set(_core._stamps_take()) == {0}, "taking clears them"



# ---- replies unpickled while the collect still waits for others ------------------------------------
# Unpickling rank 0's reply makes rank 1 reply: a collect of both can only end if the early reply is
# unpickled during the collect, not after the last reply came (it would wait for rank 1 until its
# timeout).
_GATHER = {}


def _reply_from_rank_1_then(tag, then):
    if then == "interrupt":
        if not _GATHER.get("interrupted"):
            _GATHER["interrupted"] = True
            raise KeyboardInterrupt
        return "from 0"
    _GATHER["rank 1"].reply(tag, "from 1", timeout=5)
    if then == "raise":
        raise RuntimeError("early reply rebuilt nowhere")
    if then == "collect":
        _GATHER["collector"].collect(tag + 100, timeout=0)
    return "from 0"


class MakesRank1Reply:
    def __init__(self, tag, then=None):
        self.args = (tag, then)

    def __reduce__(self):
        return (_reply_from_rank_1_then, self.args)


class _RepliesLoadsBadly:
    """Stands in for rank 1's worker: its reply fails to unpickle too."""

    def __init__(self, worker):
        self.worker = worker

    def reply(self, tag, _obj, timeout):
        self.worker.reply(tag, LoadsBadly(), timeout=timeout)


@pytest.fixture
def chained_gather(gather_pair):
    g, ws = gather_pair(2)
    _GATHER.update({"collector": g, "rank 1": ws[1]})
    yield g, ws
    _GATHER.clear()


@pytest.mark.parametrize("posted", ["before the collect", "during its wait"])
def test_replies_that_come_while_others_are_awaited_are_unpickled_during_the_collect(chained_gather, posted):
    # "during its wait": the early reply comes while the collect waits with the GIL released, so its
    # unpickling takes the GIL back from inside the wait.
    g, ws = chained_gather

    def post(tag):
        if posted == "before the collect":
            ws[0].reply(tag, MakesRank1Reply(tag), timeout=5)
        else:
            threading.Timer(0.05, lambda: ws[0].reply(tag, MakesRank1Reply(tag), timeout=5)).start()

    post(1)
    assert g.collect(1, timeout=5) == ["from 0", "from 1"]
    post(2)
    assert g.collect_async(2, [1, 0], timeout=5).result() == ["from 1", "from 0"]


def test_a_rank_asked_for_twice_gets_two_objects_whether_unpickled_early_or_late(chained_gather):
    # Lists: whether a reply was unpickled once per slot shows. Rank 0's comes first (unpickled early),
    # rank 1's 50 ms into the collect's wait (unpickled at the end).
    g, ws = chained_gather
    ws[0].reply(1, ["a"], timeout=5)
    threading.Timer(0.05, lambda: ws[1].reply(1, ["b"], timeout=5)).start()
    replies = g.collect(1, [0, 0, 1, 1], timeout=5)
    assert replies == [["a"], ["a"], ["b"], ["b"]]
    assert replies[0] is not replies[1] and replies[2] is not replies[3]


class _Alarm(Exception):
    pass


class RebuiltBy:
    """Unpickled as function(*args): a reply whose unpickling runs the test's code."""

    def __init__(self, function, *args):
        self.rebuild = (function, args)

    def __reduce__(self):
        return self.rebuild


def _sleep_then(x):
    time.sleep(1)  # Python code: the SIGALRM handler runs in here and raises
    return x


def _raise_alarm(*_):
    raise _Alarm("alarm")


class _AlarmHandler:
    def __call__(self, *_):
        raise _Alarm("alarm")

    def method(self, *_):
        raise _Alarm("alarm")


# Every form a handler takes runs a Python frame that must be recognised as the handler's.
@pytest.mark.parametrize("handler", [_raise_alarm, _AlarmHandler().method, _AlarmHandler(),
                                     functools.partial(_raise_alarm, "bound argument")],
                         ids=["function", "bound method", "callable object", "partial"])
def test_what_a_signal_handler_raises_during_an_early_unpickling_ends_the_collect_at_once(chained_gather, handler):
    g, ws = chained_gather
    previous = signal.signal(signal.SIGALRM, handler)
    try:
        ws[0].reply(1, RebuiltBy(_sleep_then, "slow"), timeout=5)
        start = time.monotonic()
        signal.setitimer(signal.ITIMER_REAL, 0.1)
        with pytest.raises(_Alarm):
            g.collect(1, timeout=30)  # rank 1 never replies: only the alarm ends it
        assert time.monotonic() - start < 10
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    ws[1].reply(1, "late", timeout=5)
    assert g.collect(1, timeout=30) == ["slow", "late"]  # rank 0's reply was kept for the retry


def test_polling_an_async_collect_unpickles_its_early_replies(chained_gather):
    g, ws = chained_gather
    ws[0].reply(1, MakesRank1Reply(1), timeout=5)
    pending = g.collect_async(1, timeout=5)
    assert pending.done()  # the poll unpickled rank 0's reply, which sent rank 1's
    assert pending.result() == ["from 0", "from 1"]


def _collects_clean(g, ws, tag, ranks):
    """A collect of `tag` finds only the replies sent now: the earlier tag left nothing in the rings."""
    for r in ranks:
        ws[r].reply(tag, f"clean {r}", timeout=5)
    assert g.collect(tag, ranks, timeout=5) == [f"clean {r}" for r in ranks]


def test_a_failed_early_unpickling_is_raised_once_every_reply_is_in_first_in_rank_order(chained_gather):
    g, ws = chained_gather
    ws[0].reply(1, MakesRank1Reply(1, "raise"), timeout=5)
    with pytest.raises(RuntimeError, match="early reply rebuilt nowhere"):
        g.collect(1, timeout=5)
    _collects_clean(g, ws, 2, [0, 1])
    # Two failures: rank 0's while rank 1 is awaited, then rank 1's; rank 1 comes first in the order asked.
    _GATHER["rank 1"] = _RepliesLoadsBadly(ws[1])
    ws[0].reply(3, MakesRank1Reply(3, "raise"), timeout=5)
    with pytest.raises(RuntimeError, match="^rebuilt nowhere"):
        g.collect(3, [1, 0], timeout=5)
    _collects_clean(g, ws, 4, [1, 0])


@pytest.mark.parametrize("bad", [b"not a pickle", pickle.dumps(LoadsBadly)[:-1] + b"X."])
def test_an_early_reply_that_the_c_unpickler_refuses_fails_its_collect_only(chained_gather, bad):
    # An error raised inside the C unpickler has no traceback (no Python frame saw it): the check for a
    # signal handler's frame must take that as "not a handler's" (it once crashed on it).
    g, ws = chained_gather
    ws[0]._worker.reply(1, bad, 5)
    threading.Timer(0.05, lambda: ws[1].reply(1, "late", timeout=5)).start()
    with pytest.raises(pickle.UnpicklingError):
        g.collect(1, timeout=5)
    _collects_clean(g, ws, 2, [0, 1])


class _Colour(enum.Enum):
    RED = 1


def test_an_early_enum_reply_that_fails_is_its_ranks_failure_not_a_signal_handlers(chained_gather):
    # SIG_DFL and SIG_IGN come back from signal.getsignal as enum members: their class's metaclass
    # __call__ (EnumType.__call__) is not a handler's frame, although an enum's unpickling error runs
    # through it. The collect goes on for rank 1 and raises rank 0's failure once every reply is in.
    g, ws = chained_gather
    ws[0].reply(1, RebuiltBy(_Colour, 7), timeout=5)
    threading.Timer(0.3, lambda: ws[1].reply(1, "late", timeout=5)).start()
    start = time.monotonic()
    with pytest.raises(ValueError, match="7 is not a valid"):
        g.collect(1, timeout=5)
    assert time.monotonic() - start >= 0.25, "the collect ended before rank 1 replied"
    _collects_clean(g, ws, 2, [0, 1])


_UNPICKLED = []


def _count_unpickling(x):
    _UNPICKLED.append(x)
    return x


def test_a_poll_unpickles_nothing_early_so_polling_collects_unpickle_each_reply_once(chained_gather):
    # ringcast.aio's collect polls with timeout 0 after each wake-up: a poll that found some replies
    # ends with TimeoutError, so it must not unpickle them (the next poll would get them again as bytes).
    g, ws = chained_gather
    _UNPICKLED.clear()
    ws[0].reply(1, RebuiltBy(_count_unpickling, "counted"), timeout=5)
    for _ in range(3):
        with pytest.raises(TimeoutError):
            g.collect(1, timeout=0)
    assert _UNPICKLED == []
    ws[1].reply(1, "b", timeout=5)
    assert g.collect(1, timeout=5) == ["counted", "b"]
    assert _UNPICKLED == ["counted"]


def test_early_unpickling_that_uses_the_same_gather_is_told_so(chained_gather):
    g, ws = chained_gather
    ws[0].reply(1, MakesRank1Reply(1, "collect"), timeout=5)
    with pytest.raises(RuntimeError, match="being unpickled"):
        g.collect(1, timeout=5)
    _collects_clean(g, ws, 2, [0, 1])


def test_ctrl_c_in_an_early_unpickling_ends_the_collect_and_a_retry_gets_every_reply(chained_gather):
    g, ws = chained_gather
    ws[0].reply(1, MakesRank1Reply(1, "interrupt"), timeout=5)
    with pytest.raises(KeyboardInterrupt):
        g.collect(1, timeout=5)  # at once: rank 1 has not replied
    ws[1].reply(1, "from 1", timeout=5)
    assert g.collect(1, timeout=5) == ["from 0", "from 1"]  # rank 0's reply was kept


# ---- the step's calls without pybind11's dispatcher (bindings/python/src/fastcall.hpp) ------------------

def _boom(*args, **kwargs):
    raise AssertionError("the pybind11 method was called")


def test_enqueue_dequeue_reply_and_collect_call_the_fast_entries(monkeypatch, queue_pair, gather_pair):
    # The pybind11 methods replaced on their classes: the public calls go around them, through the
    # callables the endpoints made once (so the step never enters pybind11's dispatcher).
    w, (r,) = queue_pair(1)
    g, (worker,) = gather_pair(1)
    for cls, method in ((_core.Writer, "send_object"), (_core.Reader, "recv_object"),
                        (_core.GatherWorker, "reply_object"), (_core.GatherCollector, "collect_objects"),
                        (_core.GatherCollector, "collect_start"), (_core.GatherCollector, "collect_is"),
                        (_core.GatherCollector, "collect_result_objects")):
        monkeypatch.setattr(cls, method, _boom)
    w.enqueue({"step": 1}, timeout=5)
    assert r.dequeue(timeout=5) == {"step": 1}
    worker.reply(1, ("done", 1), timeout=5)
    assert g.collect(1, timeout=5) == [("done", 1)]
    pending = g.collect_async(2, timeout=5)
    worker.reply(2, ("done", 2), timeout=5)
    assert pending.result() == [("done", 2)]


def test_a_fast_entry_keeps_its_endpoint_alive(gather_pair):
    g, (worker,) = gather_pair(1)
    reply = worker._worker.fast_reply_object()
    collect = g._collector.fast_collect_objects()
    core_worker = worker._worker
    del worker, core_worker  # the entry alone holds the GatherWorker now
    gc.collect()
    reply(3, "still here", 5)
    assert collect(3, None, 5) == ["still here"]
    del reply
    gc.collect()
    with pytest.raises(ringcast.ClosedError):  # the worker, freed with its last holder, closed its ring
        collect(4, [0], 5)


@pytest.mark.parametrize("bad", [("x", "obj"), (-1, "obj"), (2**64, "obj"), (1.5, "obj"), (True, "obj", "soon"),
                                 (1,), (1, "obj", None, None)])
def test_a_fast_entry_refuses_bad_arguments_in_pybind11s_words(gather_pair, bad):
    # raise_in_callers_terms (ringcast._args) recognises the refusal by these words and names the
    # bad argument; any other TypeError passes through it as it was.
    g, (worker,) = gather_pair(1)
    with pytest.raises(TypeError, match=r"^reply_object\(\): incompatible function arguments\. "):
        worker._worker.fast_reply_object()(*bad)
    collect = g._collector.fast_collect_objects()
    for ranks in ("01", [0.0], [-1], [2**32], 5):
        with pytest.raises(TypeError, match=r"^collect_objects\(\): incompatible function arguments\. "):
            collect(1, ranks, 0)
    with pytest.raises(TypeError, match=r"^collect_objects\(\): incompatible function arguments\. .*positional"):
        collect(1, None, timeout=0)
    with pytest.raises(TypeError, match=r"^collect_objects\(\): incompatible function arguments\. .*2\.\.3"):
        collect(1)


def test_a_fast_entry_raises_what_the_method_raises(queue_pair, gather_pair):
    w, (r,) = queue_pair(1)
    g, (worker,) = gather_pair(1)
    calls = [
        (g._collector.collect_objects, g._collector.fast_collect_objects(), (1, [5], 0)),   # ValueError
        (g._collector.collect_objects, g._collector.fast_collect_objects(), (1, [0], 0)),   # TimeoutError
        (r._reader.recv_object, r._reader.fast_recv_object(), (0,)),                        # TimeoutError
        (w._writer.send_object, w._writer.fast_send_object(), (lambda: 0, 1)),              # pickle's error
        (worker._worker.reply_object, worker._worker.fast_reply_object(), (1, lambda: 0)),  # pickle's error
    ]
    closed = g._collector.fast_collect_objects()
    for method, entry, args in calls:
        with pytest.raises(Exception) as by_method:
            method(*args)
        with pytest.raises(Exception) as by_entry:
            entry(*args)
        assert (type(by_entry.value), str(by_entry.value)) == (type(by_method.value), str(by_method.value))
    collector = g._collector
    g.close()
    with pytest.raises(ringcast.ClosedError) as by_method:
        collector.collect_objects(2, None, 1)
    with pytest.raises(ringcast.ClosedError) as by_entry:
        closed(2, None, 1)
    assert str(by_entry.value) == str(by_method.value)


def test_fast_entries_are_made_by_their_endpoints_only(queue_pair):
    w, _ = queue_pair(1)
    entry = w._writer.fast_send_object()
    with pytest.raises(TypeError):
        type(entry)()
    with pytest.raises(TypeError):  # another class's object
        _core.Reader.fast_recv_object(w._writer)
    assert "send_object" in repr(entry)


def test_a_fast_entry_reads_ranks_from_a_snapshot(gather_pair):
    # An item's __index__ may change the caller's list while the ranks are read: the entry reads a
    # copy taken first (reading the list itself went past its end: a crash).
    g, (worker,) = gather_pair(1)
    ranks = []

    class ClearsTheList:
        def __index__(self):
            ranks.clear()
            return 0

    ranks.extend([ClearsTheList(), 0, 0, 0])
    worker.reply(1, "r", timeout=5)
    assert g._collector.fast_collect_objects()(1, ranks, 5) == ["r"] * 4
    assert ranks == []


def test_an_endpoint_in_a_cycle_through_its_fast_entry_is_freed():
    class Collector(_core.GatherCollector):
        pass

    c = Collector(f"rc-fast-cycle-{os.getpid()}", 1, 65536)
    c.entry = c.fast_collect_objects()  # c -> its __dict__ -> the entry -> c
    alive = weakref.ref(c)
    del c
    gc.collect()
    assert alive() is None, "the collector in a cycle through its fast entry was never freed"


@pytest.mark.parametrize("tag", [Fraction(7, 2), Decimal(3), 3.0])
def test_a_tag_that_is_not_an_integer_is_refused_by_every_call(gather_pair, tag):
    # pybind11 took any number with __int__ and truncated it (Fraction(7, 2) became tag 3).
    g, (worker,) = gather_pair(1)
    for call in (lambda: worker.reply(tag, "x", timeout=1), lambda: g.collect(tag, timeout=0),
                 lambda: g.collect_async(tag, timeout=0)):
        with pytest.raises(TypeError, match="tag must be an int"):
            call()
