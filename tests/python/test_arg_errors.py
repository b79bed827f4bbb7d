"""Bad arguments are refused at once, in the caller's terms: ValueError (out of range) or TypeError (wrong
type) naming the argument and its limit, never pybind11's "incompatible function arguments", a hang, an
empty MemoryError or a silently taken value."""
import dataclasses
import math
import os
import time

import pytest

import ringcast
from ringcast import _core

np = pytest.importorskip("numpy")


def refused(exc, call, *words):
    """`call()` raises `exc` at once (< 2 s) with every word of `words` in its message."""
    start = time.monotonic()
    with pytest.raises(exc) as info:
        call()
    took = time.monotonic() - start
    text = str(info.value)
    assert "incompatible" not in text  # pybind11's "incompatible function/constructor arguments"
    for w in words:
        assert w in text, f"{w!r} not in {text!r}"
    assert took < 2.0, f"took {took:.1f} s before refusing: {text}"
    return text


# ---- 1, 2: reader counts ---------------------------------------------------------------------------

def test_huge_reader_counts_refused_at_once():
    refused(ValueError, lambda: ringcast.MessageQueue(10**9, 1), "n_reader", "65536")
    refused(ValueError, lambda: ringcast.MessageQueue(10**9, 1, connect_ip="127.0.0.1"), "n_reader", "65536")
    refused(ValueError, lambda: ringcast.MessageQueue(2**33, 2**33), "n_local_reader", "1024")
    refused(ValueError, lambda: ringcast.MessageQueue(10**7, 10**7), "n_local_reader", "1024")
    refused(ValueError, lambda: ringcast.MessageQueue(1025, 1025), "n_local_reader", "0..1024")


def test_local_reader_limit_with_remote_readers_names_n_local_reader():
    # The publisher of the remote readers takes one of the ring's MAX_READERS ranks.
    text = refused(ValueError, lambda: ringcast.MessageQueue(1025, 1024, connect_ip="127.0.0.1"),
                   "n_local_reader", str(_core.MAX_READERS - 1), "remote")
    assert "1025" not in text.split("got")[-1]


def test_rank_beyond_uint32_refused():
    refused(ValueError, lambda: ringcast.MessageQueue(1, 1, local_reader_ranks=[2**40]),
            "local_reader_ranks", str(2**32 - 1))


# ---- 3: C++ integer ranges, in the caller's terms ------------------------------------------------

@pytest.mark.parametrize("size", [2**40, 2**62, 2**70])
def test_max_chunk_bytes_too_large(size):
    refused(ValueError, lambda: ringcast.MessageQueue(1, 1, max_chunk_bytes=size), "max_chunk_bytes",
            str(2**38 - 16))


def test_ring_too_large_names_max_chunks():
    refused(ValueError, lambda: ringcast.MessageQueue(1, 1, max_chunk_bytes=2**20, max_chunks=2**21),
            "max_chunk_bytes * max_chunks", "1 TiB")
    refused(ValueError, lambda: ringcast.MessageQueue(1, 1, max_chunk_bytes=1, max_chunks=2**64), "max_chunks")


def test_acquire_write_size_beyond_size_t(queue_pair):
    q, _ = queue_pair(1)
    for size in (2**64, 2**80):
        with pytest.raises(ValueError, match=r"size must be at most \d+") as info:
            with q.acquire_write(size=size):
                pass
        assert "incompatible" not in str(info.value)


def test_dequeue_many_max_n_beyond_size_t(queue_pair):
    q, (r,) = queue_pair(1)
    refused(ValueError, lambda: r.dequeue_many(2**64, timeout=0), "max_n", str(2**64 - 1))
    q.enqueue(1)
    assert r.dequeue_many(2**64 - 1, timeout=5) == [1]


@pytest.mark.parametrize("mode", [-1, 2**32, 0o1000])
def test_gather_mode_out_of_range(mode):
    refused(ValueError, lambda: ringcast.ReplyGather(1, mode=mode), "mode", "511")


def test_gather_mode_type():
    refused(TypeError, lambda: ringcast.ReplyGather(1, mode=0o600 * 1.0), "mode")


def test_gather_n_ranks_out_of_range():
    refused(ValueError, lambda: ringcast.ReplyGather(2**40), "n_ranks", "at most 1024")


@pytest.mark.parametrize("size", [2**40, 2**64])
def test_max_reply_bytes_too_large(size):
    refused(ValueError, lambda: ringcast.ReplyGather(1, max_reply_bytes=size), "max_reply_bytes", str(2**38 - 64))


def test_max_reply_bytes_negative_or_fractional():
    refused(ValueError, lambda: ringcast.ReplyGather(1, max_reply_bytes=-5), "max_reply_bytes", "0..")
    refused(TypeError, lambda: ringcast.ReplyGather(1, max_reply_bytes=1.5), "max_reply_bytes")
    refused(TypeError, lambda: ringcast.ReplyGather(1, max_reply_bytes=True), "max_reply_bytes")


# ---- 4: a handle whose name no segment can have --------------------------------------------------

def test_queue_handle_with_invalid_name(queue_pair):
    q, _ = queue_pair(1)
    bad = dataclasses.replace(q.export_handle(), name="a/b")
    text = refused(ValueError, lambda: ringcast.MessageQueue.create_from_handle(bad, 0), "'a/b'",
                   "not a valid segment name")
    assert "stale" not in text


def test_gather_handle_with_invalid_name():
    g = ringcast.ReplyGather(1)
    try:
        bad = dataclasses.replace(g.export_handle(), name="a/b")
        text = refused(ValueError, lambda: ringcast.ReplyGather.create_from_handle(bad, 0), "'a/b'",
                       "not a valid segment name")
        assert "stale" not in text
    finally:
        g.close()


# ---- 5: ReplyGather takes bools and numpy ints as MessageQueue does ------------------------------

@pytest.fixture
def gather_pair():
    g = ringcast.ReplyGather(2)
    w = ringcast.ReplyGather.create_from_handle(g.export_handle(), 0)
    w1 = ringcast.ReplyGather.create_from_handle(g.export_handle(), 1)
    yield g, w, w1
    w.close()
    w1.close()
    g.close()


def test_gather_numpy_rank():
    g = ringcast.ReplyGather(2)
    try:
        # numpy's ints are ranks, as MessageQueue.create_from_handle takes them
        w = ringcast.ReplyGather.create_from_handle(g.export_handle(), np.int64(0))
        w1 = ringcast.ReplyGather.create_from_handle(g.export_handle(), np.uint8(1))
        assert w.rank == 0 and type(w.rank) is int
        assert w1.rank == 1 and type(w1.rank) is int
        w.reply(3, "a")
        w1.reply(3, "b")
        assert g.collect(3, timeout=5) == ["a", "b"]
        w.close()
        w1.close()
    finally:
        g.close()


def test_gather_bool_tags_refused(gather_pair):
    g, w, _ = gather_pair
    refused(TypeError, lambda: w.reply(True, "x"), "tag", "bool")
    refused(TypeError, lambda: w.reply(False, "x"), "tag", "bool")
    refused(TypeError, lambda: g.collect(True, 0, timeout=0), "tag", "bool")
    refused(TypeError, lambda: g.collect_async(True, 0, timeout=0), "tag", "bool")


def test_gather_bool_timeouts_refused(gather_pair):
    g, w, _ = gather_pair
    refused(TypeError, lambda: w.reply(1, "x", timeout=True), "timeout", "bool")
    refused(TypeError, lambda: g.collect(1, 1, timeout=True), "timeout", "bool")  # not a 1 s wait
    refused(TypeError, lambda: g.collect(1, 1, timeout=False), "timeout", "bool")
    refused(TypeError, lambda: g.collect_async(1, 1, timeout=True), "timeout", "bool")


def test_gather_numpy_tags_taken(gather_pair):
    g, w, w1 = gather_pair
    w.reply(np.uint64(7), "a")
    w1.reply(np.int64(7), "b")
    assert g.collect(np.int32(7), timeout=5) == ["a", "b"]


# ---- 6: spins and liveness intervals that no integer of nanoseconds holds ------------------------

BAD_FLOATS = [math.inf, -math.inf, math.nan, 1e300]


@pytest.mark.parametrize("value", BAD_FLOATS)
@pytest.mark.parametrize("arg", ["spin_us", "spin_max_us"])
def test_spin_not_finite_or_huge(arg, value):
    refused(ValueError, lambda: ringcast.MessageQueue(1, 1, **{arg: value}), arg)
    refused(ValueError, lambda: ringcast.ReplyGather(1, **{arg: value}), arg)


@pytest.mark.parametrize("value", BAD_FLOATS + [86400.5])
def test_liveness_not_finite_or_huge(value):
    refused(ValueError, lambda: ringcast.MessageQueue(1, 1, liveness_interval=value), "liveness_interval")
    refused(ValueError, lambda: ringcast.ReplyGather(1, liveness_interval=value), "liveness_interval")


def test_spin_and_liveness_limits_still_taken(queue_pair):
    # The largest values taken: a one-hour spin, a one-day liveness interval; and the small ones.
    q, (r,) = queue_pair(1, spin_us=3.6e9, spin_max_us=3.6e9, liveness_interval=86400.0)
    q.enqueue("x")
    assert r.dequeue(timeout=5) == "x"
    q2, (r2,) = queue_pair(1, spin_us=0.0, spin_max_us=0, liveness_interval=1e-3)
    q2.enqueue("y")
    assert r2.dequeue(timeout=5) == "y"
    g = ringcast.ReplyGather(1, spin_us=3.6e9, spin_max_us=0.0, liveness_interval=86400)
    g.close()


def test_numpy_integers_are_ints_for_the_constructors_too():
    """python.md's error table: numpy's integers are ints — the counts and sizes of both constructors
    took only int; the handles carry plain ints (a reader without numpy can unpickle them)."""
    np = pytest.importorskip("numpy")
    import pickle
    q = ringcast.MessageQueue(np.int64(1), np.int32(1), max_chunk_bytes=np.int64(1 << 16), max_chunks=np.int8(4))
    h = q.export_handle()
    assert type(h.n_reader) is int and b"numpy" not in pickle.dumps(h)
    q.shutdown()
    g = ringcast.ReplyGather(np.int64(2), max_reply_bytes=np.int64(1000), mode=np.int64(0o600))
    assert b"numpy" not in pickle.dumps(g.export_handle())
    g.close()


def test_a_queue_or_gather_passed_to_another_process_says_to_pass_its_handle():
    import multiprocessing as mp
    import pickle
    q = ringcast.MessageQueue(1, 1)
    g = ringcast.ReplyGather(1)
    try:
        for obj, cls in ((q, "MessageQueue"), (g, "ReplyGather")):
            with pytest.raises(TypeError, match=f"{cls}.create_from_handle"):
                pickle.dumps(obj)
            p = mp.get_context("spawn").Process(target=print, args=(obj,))
            with pytest.raises(TypeError, match="export_handle"):
                p.start()
    finally:
        q.shutdown()
        g.close()


def test_endpoint_options_of_a_wrong_type_are_refused_naming_them():
    """name, wait, method, spin_us, spin_max_us, liveness_interval of a wrong type: a TypeError naming
    the argument, before anything is made (pybind11 said "incompatible constructor arguments"; a bytes
    name was taken and failed later with "Can't mix strings and bytes")."""
    small = dict(max_chunk_bytes=1024, max_chunks=4)
    for kwargs, word in ((dict(name=5), "name"), (dict(name=b"q"), "name"), (dict(wait=None), "wait"),
                         (dict(spin_us="1"), "spin_us"), (dict(spin_max_us="1"), "spin_max_us"),
                         (dict(liveness_interval=None), "liveness_interval"),
                         (dict(liveness_interval=True), "liveness_interval")):
        refused(TypeError, lambda: ringcast.MessageQueue(1, 1, **small, **kwargs), word)
        refused(TypeError, lambda: ringcast.ReplyGather(1, max_reply_bytes=1024, **kwargs), word)
    refused(TypeError, lambda: ringcast.ReplyGather(1, method=None), "method")
    refused(TypeError, lambda: ringcast.MessageQueue(1, 1, **small, wake_ahead="no"), "wake_ahead")
    refused(TypeError, lambda: ringcast.ReplyGather(1, spin_max_us=None), "spin_max_us")  # (MessageQueue: the default)


def test_an_empty_name_is_refused_not_taken_as_a_generated_one():
    """name='' made a generated name, as None does (the docs say 1..200 characters): a caller that
    computed an empty name by mistake got an unnamed queue the other side could never find by name."""
    before = set(os.listdir("/dev/shm"))
    refused(ValueError, lambda: ringcast.MessageQueue(1, 1, max_chunk_bytes=1024, max_chunks=4, name=""), "name")
    refused(ValueError, lambda: ringcast.ReplyGather(1, max_reply_bytes=1024, name=""), "name")
    assert set(os.listdir("/dev/shm")) - before == set(), "a refused name left something in /dev/shm"


def test_a_gather_name_too_long_for_its_derived_names_says_so():
    """A ReplyGather name of 196..200 characters is a valid segment name, but its bell and reply rings
    (<name>.bell, <name>.r<rank>) are not: the refusal said "segment name must be 1..200 characters, got
    205" about a name of 200. It names the group's name, the derived names and the longest that fits."""
    e = refused(ValueError, lambda: ringcast.ReplyGather(12, max_reply_bytes=1024, name="g" * 197),
                "gather name of 197 characters is too long for 12 ranks")
    assert "'<name>.bell'" in str(e) and "'<name>.r11'" in str(e) and "use at most 195 characters" in str(e), str(e)
    g = ringcast.ReplyGather(12, max_reply_bytes=1024, name="g" * 195)  # the longest that fits
    g.close()
