"""ReplyGather: replies from N worker processes collected with one wait; tags; timeouts; dead workers."""
import asyncio
import gc
import multiprocessing as mp
import os
import threading
import time

import pytest

import ringcast
from _workers import (gather_attach_unless, gather_replies_after_executor_closed, gather_worker, gather_worker_dies, np,
                      pattern, refused_in_a_forked_child)

METHODS = ["doorbell", "futex_waitv"]


def collect_from_worker_processes(g, start, steps, take):
    """Runs one gather_worker process per rank of `g` (started by `start`); for tags 1..steps,
    take(tag) must return every rank's reply, checked rank by rank (order, tag, payload)."""
    ctx = mp.get_context(start)
    n = g.n_ranks
    procs = [ctx.Process(target=gather_worker, args=(g.export_handle(), r, steps, 1)) for r in range(n)]
    for p in procs:
        p.start()
    try:
        for tag in range(1, steps + 1):
            replies = take(tag)
            assert [r["rank"] for r in replies] == list(range(n))
            for r in replies:
                assert r["tag"] == tag
                assert r["payload"] == pattern(100 + 37 * r["rank"], tag)
    finally:
        for p in procs:
            p.join(30)
    assert all(p.exitcode == 0 for p in procs)
    g.close()


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("start", ["fork", "spawn"])
def test_collect_all_from_worker_processes(method, start):
    g = ringcast.ReplyGather(3, method=method, max_reply_bytes=4096)
    collect_from_worker_processes(g, start, 300, lambda tag: g.collect(tag, timeout=30))


@pytest.mark.parametrize("method", METHODS)
def test_single_rank_and_subsets(method):
    g = ringcast.ReplyGather(3, method=method)
    w = [ringcast.ReplyGather.create_from_handle(g.export_handle(), r) for r in range(3)]
    w[0].reply(5, "only rank 0")
    assert g.collect(5, 0, timeout=1) == ["only rank 0"]
    w[2].reply(6, "two")
    w[1].reply(6, "one")
    assert g.collect(6, [2, 1], timeout=1) == ["two", "one"]  # in the order asked for
    for x in w:
        x.close()
    g.close()


@pytest.mark.parametrize("method", METHODS)
def test_stale_reply_is_an_error_naming_rank_and_tags(method):
    g = ringcast.ReplyGather(2, method=method)
    w0 = ringcast.ReplyGather.create_from_handle(g.export_handle(), 0)
    w1 = ringcast.ReplyGather.create_from_handle(g.export_handle(), 1)
    w0.reply(41, "late answer to request 41")
    w1.reply(42, "fresh")
    with pytest.raises(ringcast.StaleReplyError, match=r"rank 0.*tag 41.*tag 42"):
        g.collect(42, timeout=1)
    assert issubclass(ringcast.StaleReplyError, ringcast.RingcastError)
    w0.reply(42, "fresh too")
    assert g.collect(42, timeout=1) == ["fresh too", "fresh"]
    g.close()


def test_a_reply_to_a_later_request_is_kept_for_that_requests_collect():
    """A worker that answered request 5 and never request 4 (a replacement): collect(4) says so, and
    collect(5) returns that answer — it was consumed as stale, and collect(5) waited for it forever."""
    g = ringcast.ReplyGather(2)
    w0 = ringcast.ReplyGather.create_from_handle(g.export_handle(), 0)
    w1 = ringcast.ReplyGather.create_from_handle(g.export_handle(), 1)
    w0.reply(4, "w0 to 4")
    w1.reply(5, "w1 to 5")
    w0.reply(5, "w0 to 5")
    with pytest.raises(ringcast.StaleReplyError, match=r"rank 1 replied with tag 5 while collecting tag 4.*kept"):
        g.collect(4, timeout=1)
    assert g.collect(5, timeout=0) == ["w0 to 5", "w1 to 5"]
    g.close()


@pytest.mark.parametrize("method", METHODS)
def test_timeout_names_the_missing_ranks(method):
    g = ringcast.ReplyGather(4, method=method)
    ws = [ringcast.ReplyGather.create_from_handle(g.export_handle(), r) for r in range(4)]
    ws[1].reply(9, 1)
    ws[3].reply(9, 3)
    t0 = time.monotonic()
    with pytest.raises(TimeoutError, match=r"ranks 0, 2"):
        g.collect(9, timeout=0.1)
    assert time.monotonic() - t0 >= 0.1
    # A timeout ends the request: replies that arrive for it later are reported as stale by the
    # next collect (see test_stale_reply_is_an_error_naming_rank_and_tags).
    g.close()


def test_dead_worker_is_named():
    ctx = mp.get_context("fork")
    g = ringcast.ReplyGather(2, liveness_interval=0.05)
    alive = ringcast.ReplyGather.create_from_handle(g.export_handle(), 0)
    p = ctx.Process(target=gather_worker_dies, args=(g.export_handle(), 1))
    p.start()
    p.join(10)
    alive.reply(1, "here")
    with pytest.raises(ringcast.PeerDeadError, match=rf"rank 1.*{p.pid}"):
        g.collect(1, timeout=10)
    g.close()


@pytest.mark.parametrize("method", METHODS)
def test_collect_is_one_wait_over_every_rank_without_the_gil(method):
    """Rank 1 replies 50 ms after the collector went to sleep, rank 0 50 ms after it slept again. One
    wait over both ranks sleeps exactly twice, none holding the GIL. futex_waitv: the first wake came
    through rank 1's ring, so the wait covered it (waiting rank by rank, on rank 0's ring first, sleeps
    on until a liveness slice: 3 sleeps, checked by hand); doorbell: any reply rings, the count shows
    no sleep beyond one per reply. The collect runs outside the main thread, whose waits are cut into
    slices for signals (those would add sleeps)."""
    g = ringcast.ReplyGather(2, wait="futex", method=method)
    ws = [ringcast.ReplyGather.create_from_handle(g.export_handle(), r) for r in range(2)]
    out = []
    collector = threading.Thread(target=lambda: out.append(g.collect(3, timeout=5)))
    ringcast._core.gil_probe_reset()
    collector.start()
    for r, text in ((1, "b"), (0, "a")):  # each once the collector sleeps (bounded wait)
        end = time.monotonic() + 10
        while ringcast._core.gil_probe()[0] < 2 - r:
            assert time.monotonic() < end, "the collector never went to sleep"
            time.sleep(0.001)
        time.sleep(0.05)
        ws[r].reply(3, text)
    collector.join(10)
    assert out == [["a", "b"]]
    sleeps, holding = ringcast._core.gil_probe()
    assert sleeps == 2 and holding == 0, f"{sleeps} sleeps ({holding} holding the GIL) for two late replies"
    g.close()


def test_shutdown_wakes_a_blocked_collect():
    g = ringcast.ReplyGather(2, wait="futex")
    threading.Timer(0.05, g.close).start()
    with pytest.raises(ringcast.ClosedError):
        g.collect(1, timeout=10)


def test_close_removes_the_groups_names_at_once():
    """As MessageQueue.shutdown() removes its name: the bell and the reply rings go with close(), not
    when the object is garbage-collected; later calls say the gather was closed."""
    g = ringcast.ReplyGather(2)
    w = ringcast.ReplyGather.create_from_handle(g.export_handle(), 1)
    names = [n for n in os.listdir("/dev/shm") if n.startswith(g.name)]
    assert len(names) == 3, names  # the bell and two reply rings
    g.close()
    assert [n for n in os.listdir("/dev/shm") if n.startswith(g.name)] == []
    with pytest.raises(ringcast.ClosedError, match="this ReplyGather was closed"):
        g.collect(1, timeout=0)
    with pytest.raises(ValueError):  # no group under the name any more
        ringcast.ReplyGather.create_from_handle(g.export_handle(), 0)
    w.close()
    with pytest.raises(ringcast.ClosedError, match="this ReplyGather was closed"):
        w.reply(1, "late")


def test_an_executor_closed_before_its_object_goes_never_blocks_its_workers():
    """close() gives the reply rings back at once, as the object's end does: a worker replying after
    it never waits for room (it waited forever: the rings kept their reader while `g` was alive)."""
    g = ringcast.ReplyGather(1, max_reply_bytes=1000)
    ctx = mp.get_context("spawn")
    attached, closed = ctx.Event(), ctx.Event()
    p = ctx.Process(target=gather_replies_after_executor_closed,
                    args=(g.export_handle(), attached, closed, 40, 5000))
    p.start()
    try:
        assert attached.wait(60), "the worker did not attach"
        g.close()
        closed.set()
        p.join(60)
        assert p.exitcode == 0, f"worker exit code {p.exitcode} (3: a reply timed out after the executor's close)"
    finally:
        if p.is_alive():
            p.kill()
    with pytest.raises(ringcast.ClosedError, match="this ReplyGather was closed"):
        g.collect(1, timeout=0)
    del g


def test_a_worker_closed_from_another_thread_wakes_its_blocked_reply_and_nothing_lands_after():
    """A reply larger than a record waits once for its whole timeout: close() from another thread
    wakes it (it waited the timeout out, then raised TimeoutError), and none of it lands."""
    g = ringcast.ReplyGather(1, max_reply_bytes=1000)
    w = ringcast.ReplyGather.create_from_handle(g.export_handle(), 0)
    sent = 0
    while True:  # fill the reply ring
        try:
            w.reply(sent, b"x" * 900, timeout=0)
        except TimeoutError:
            break
        sent += 1
    outcome = {}

    def blocked_reply():
        t0 = time.monotonic()
        try:
            w.reply(999, b"y" * 20_000, timeout=10)  # larger than a record: one wait for the whole timeout
            outcome["got"] = "returned"
        except Exception as e:  # noqa: BLE001 — the type is the assertion
            outcome["got"] = e
        outcome["after"] = time.monotonic() - t0

    t = threading.Thread(target=blocked_reply)
    t.start()
    time.sleep(0.2)
    w.close()
    t.join(15)
    assert isinstance(outcome.get("got"), ringcast.ClosedError), outcome
    assert outcome["after"] < 3, outcome
    for tag in range(sent):  # what was sent before the close is all there ...
        assert g.collect(tag, [0], timeout=5) == [b"x" * 900]
    with pytest.raises(ringcast.ClosedError):  # ... and the blocked reply never landed
        g.collect(999, [0], timeout=1)
    g.close()


def test_a_fifo_under_the_bells_name_is_refused_at_once():
    """A FIFO where the doorbell goes blocked the create's read-only look at it forever (no writer
    ever opens it); now it is refused at once, naming the object, and nothing of the group stays."""
    import subprocess
    import sys
    name = f"fifo-bell-{os.getpid()}"
    os.mkfifo(f"/dev/shm/{name}.bell")
    try:
        code = f"import ringcast\ntry:\n    ringcast.ReplyGather(1, name={name!r})\nexcept ValueError as e:\n    print(e)\n"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30,
                             env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
        assert f"{name}.bell' already exists and is not a ringcast doorbell" in out.stdout, out
        assert sorted(n for n in os.listdir("/dev/shm") if n.startswith(name)) == [f"{name}.bell"]
    finally:
        os.unlink(f"/dev/shm/{name}.bell")


def test_a_second_worker_on_a_rank_is_told_in_the_gathers_words():
    g = ringcast.ReplyGather(2)
    w = ringcast.ReplyGather.create_from_handle(g.export_handle(), 1)
    try:
        with pytest.raises(ValueError) as info:
            ringcast.ReplyGather.create_from_handle(g.export_handle(), 1)
        text = str(info.value)
        assert text.startswith(f"cannot attach rank 1 to gather '{g.name}': rank 1 already has a live worker "
                               f"(pid {os.getpid()}); one worker per rank"), text
        assert ".r1'" not in text and "segment" not in text  # not the reply ring's internal name
    finally:
        w.close()
        g.close()


def test_wait_until_ready_waits_for_every_local_worker_and_names_one_that_never_attached():
    """A worker that failed before it attached would be waited for by every collect (forever with the
    default timeout): the executor's wait_until_ready bounds the start-up, as MessageQueue's does."""
    ctx = mp.get_context("spawn")
    g = ringcast.ReplyGather(3)
    with pytest.raises(TimeoutError, match=r"local worker rank\(s\) 0, 1, 2 did not attach"):
        g.wait_until_ready(timeout=0.05)
    procs = [ctx.Process(target=gather_attach_unless, args=(g.export_handle(), r, 1)) for r in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    t0 = time.monotonic()
    with pytest.raises(TimeoutError, match=r"local worker rank\(s\) 1 did not attach to gather"):
        g.wait_until_ready(timeout=0.5)
    assert 0.4 < time.monotonic() - t0 < 5
    w1 = ringcast.ReplyGather.create_from_handle(g.export_handle(), 1)
    g.wait_until_ready(timeout=5)  # ranks 0 and 2 attached and closed: they count
    w1.close()
    g.close()


def test_a_close_ends_a_wait_until_ready_with_closed_error_not_a_hang():
    """A close — from another thread during the wait, or before it — ends the executor's
    wait_until_ready with ClosedError. It looked only for unattached ranks: without a timeout it waited
    forever for a worker that can no longer attach, with one it ended in TimeoutError. And a worker
    closed but not gone still holds its rank, as the refusal of a second one now says."""
    import threading
    g = ringcast.ReplyGather(2, max_reply_bytes=1024)
    w = ringcast.ReplyGather.create_from_handle(g.export_handle(), 0)
    threading.Timer(0.2, g.close).start()
    t0 = time.monotonic()
    with pytest.raises(ringcast.ClosedError, match="was closed"):
        g.wait_until_ready(timeout=30)
    assert time.monotonic() - t0 < 10
    with pytest.raises(ringcast.ClosedError, match="was closed"):
        g.wait_until_ready()
    g2 = ringcast.ReplyGather(1, max_reply_bytes=1024)
    w2 = ringcast.ReplyGather.create_from_handle(g2.export_handle(), 0)
    w2.close()
    with pytest.raises(ValueError, match=r"close\(\) alone keeps the rank"):
        ringcast.ReplyGather.create_from_handle(g2.export_handle(), 0)
    del w2
    import gc
    gc.collect()
    ringcast.ReplyGather.create_from_handle(g2.export_handle(), 0).close()
    w.close()
    g2.close()


def test_bad_arguments():
    with pytest.raises(ValueError):
        ringcast.ReplyGather(0)
    g = ringcast.ReplyGather(2)
    with pytest.raises(ValueError):
        g.collect(1, 5, timeout=0)
    with pytest.raises(ValueError):
        ringcast.ReplyGather.create_from_handle(g.export_handle(), 2)
    with pytest.raises(ValueError):
        ringcast.ReplyGather.create_from_handle("not a handle", 0)
    with pytest.raises(ValueError, match="method"):
        ringcast.ReplyGather(2, method="poll")
    g.close()


def test_handles_from_another_version_are_refused():
    import dataclasses
    import pickle as pk

    g = ringcast.ReplyGather(1)
    old = dataclasses.replace(g.export_handle(), abi_version=ringcast._core.ABI_VERSION + 1)
    with pytest.raises(ValueError, match="another ringcast version"):
        ringcast.ReplyGather.create_from_handle(pk.loads(pk.dumps(old)), 0)
    q = ringcast.MessageQueue(1, 1)
    h = q.export_handle()
    legacy = pk.loads(pk.dumps(h))
    del legacy.__dict__["abi_version"]  # as pickled by a version that had no such field
    with pytest.raises(ValueError, match="ABI unknown"):
        ringcast.MessageQueue.create_from_handle(legacy, 0)
    ringcast.MessageQueue.create_from_handle(h, 0).shutdown()  # the current one attaches
    q.shutdown()
    g.close()


def test_adaptive_spin_travels_in_handles_and_delivers():
    """spin_max_us (the adaptive hybrid) reaches the workers through the handles; replies and
    broadcasts arrive as with the default wait."""
    g = ringcast.ReplyGather(2, spin_max_us=2000.0, max_reply_bytes=4096)
    assert g.export_handle().spin_max_us == 2000.0
    collect_from_worker_processes(g, "spawn", 200, lambda tag: g.collect(tag, timeout=30))
    q = ringcast.MessageQueue(1, 1, spin_max_us=500.0)
    assert q.export_handle().spin_max_us == 500.0
    r = ringcast.MessageQueue.create_from_handle(q.export_handle(), 0)
    q.enqueue("x")
    assert r.dequeue(timeout=1) == "x"
    q.shutdown()
    with pytest.raises(ValueError, match="spin_max_us"):
        ringcast.ReplyGather(1, spin_max_us=-1.0)


def test_a_worker_caps_its_spin_at_a_writers_2_ms_whatever_the_collects_cap():
    """The collect spins up to 10 ms by default (a step in flight); a worker's only wait is for room in
    its reply ring (the executor busy elsewhere), so it keeps a writer's 2 ms or the handle's less."""
    for asked, executor, worker in ((None, ringcast._core.COLLECT_SPIN_MAX_US, 2000.0), (5000.0, 5000.0, 2000.0),
                                    (500.0, 500.0, 500.0), (0.0, 0.0, 0.0)):
        g = ringcast.ReplyGather(1) if asked is None else ringcast.ReplyGather(1, spin_max_us=asked)
        w = ringcast.ReplyGather.create_from_handle(g.export_handle(), 0)
        assert (g.spin_max_us, g.export_handle().spin_max_us, w.spin_max_us) == (executor, executor, worker), asked
        w.reply(1, "r")
        assert g.collect(1, timeout=5) == ["r"]
        w.close()
        g.close()
    assert ringcast._core.COLLECT_SPIN_MAX_US == 10000.0


def test_adaptive_spin_stops_once_idle():
    """After a burst of quick steps (waits the adaptive spin spins through), a collector left waiting
    spins at most once more (<= 2 ms) and then sleeps: well under 5 % of a CPU over half a second."""
    g = ringcast.ReplyGather(1, spin_max_us=2000.0)
    w = ringcast.ReplyGather.create_from_handle(g.export_handle(), 0)
    for tag in range(1, 200):
        threading.Timer(0.0002, w.reply, args=(tag, tag)).start()
        assert g.collect(tag, timeout=5) == [tag]
    t0, c0 = time.perf_counter(), time.thread_time()
    with pytest.raises(TimeoutError):
        g.collect(999, timeout=0.5)
    cpu = (time.thread_time() - c0) / (time.perf_counter() - t0)
    assert cpu < 0.05, f"an idle adaptive collector used {cpu:.1%} of a CPU"
    w.close()
    g.close()


def test_adaptive_spin_catches_waits_as_short_as_recent_ones():
    """The point of spin_max_us: once an endpoint's waits have been short (~0.3 ms here), a wait of that
    length is spun through, not slept through (no kernel wait), which the default 10 us spin cannot
    do. Timing-based; the python suite runs alone (RUN_SERIAL), so the spinner keeps its CPU."""
    import queue as q

    def kernel_waits_for_30_replies(spin_max_us):
        g = ringcast.ReplyGather(1, spin_max_us=spin_max_us)
        w = ringcast.ReplyGather.create_from_handle(g.export_handle(), 0)
        jobs = q.Queue()

        def replier():
            while (job := jobs.get()) is not None:
                tag, start = job
                while time.perf_counter() - start < 0.0003:
                    pass
                w.reply(tag, tag)

        t = threading.Thread(target=replier)
        t.start()
        for tag in range(1, 41):
            if tag == 11:  # the first ten teach the endpoint how long its waits last
                before = g._collector.kernel_waits
            jobs.put((tag, time.perf_counter()))
            assert g.collect(tag, timeout=5) == [tag]
        slept = g._collector.kernel_waits - before
        jobs.put(None)
        t.join()
        w.close()
        g.close()
        return slept

    # Up to 3 rounds: a round the machine disturbs (the polite spin sleeps when its CPU is wanted) is
    # retried; an adaptive spin that does not work fails every round.
    rounds = []
    for _ in range(3):
        plain, adaptive = kernel_waits_for_30_replies(0.0), kernel_waits_for_30_replies(2000.0)
        rounds.append((plain, adaptive))
        if plain >= 20 and adaptive <= 10:
            return
    pytest.fail(f"kernel waits out of 30 (plain 10 us spin, adaptive) per round: {rounds}; expected "
                f"plain >= 20 (control) and adaptive <= 10")


def test_the_default_collect_spins_through_steps_of_a_few_ms():
    """ReplyGather's default cap on the adaptive spin is 10 ms (COLLECT_SPIN_MAX_US), a MessageQueue
    reader's 5 ms (2 ms where its processes share CPUs): once its collects have learned that steps take
    ~5 ms, a default collect spins through them (about no kernel wait), where the 2 ms cap sleeps until
    the predicted window (one per collect).
    The handle carries the cap to the workers. Timing-based, with the neighbour's retries."""
    g = ringcast.ReplyGather(1)
    assert g.export_handle().spin_max_us == ringcast._core.COLLECT_SPIN_MAX_US == 10000.0
    g.close()
    q = ringcast.MessageQueue(1, 1)
    assert q.export_handle().spin_max_us == ringcast._queue.default_spin_max_us(1), "a reader's: 5 or 2 ms"
    q.shutdown()

    def kernel_waits_for_20_steps(**options):
        g = ringcast.ReplyGather(1, **options)
        w = ringcast.ReplyGather.create_from_handle(g.export_handle(), 0)
        for tag in range(1, 31):
            if tag == 11:  # the first ten teach the collector how long its steps last
                before = g._collector.kernel_waits
            threading.Timer(0.005, w.reply, args=(tag, tag)).start()
            assert g.collect(tag, timeout=5) == [tag]
        slept = g._collector.kernel_waits - before
        w.close()
        g.close()
        return slept

    rounds = []
    for _ in range(3):
        default, reader_cap = kernel_waits_for_20_steps(), kernel_waits_for_20_steps(spin_max_us=2000.0)
        rounds.append((default, reader_cap))
        if default <= 10 and reader_cap >= 15:
            return
    pytest.fail(f"kernel waits out of 20 steps of 5 ms (default cap, 2 ms cap) per round: {rounds}; expected "
                f"default <= 10 and 2 ms >= 15 (control)")


@pytest.mark.parametrize("method", METHODS)
def test_collect_async_matches_collect_across_processes(method):
    """collect_async + result() gives what collect() gives, for worker processes, while this thread runs
    Python in between."""
    g = ringcast.ReplyGather(3, method=method, max_reply_bytes=4096)

    def take(tag):
        pending = g.collect_async(tag, timeout=30)
        busy_until = time.perf_counter() + 0.0002
        while time.perf_counter() < busy_until:  # "prepare the next step" with the GIL held
            pass
        return pending.result()

    collect_from_worker_processes(g, "fork", 200, take)


def test_collect_async_done_result_and_one_at_a_time():
    g = ringcast.ReplyGather(2)
    w = [ringcast.ReplyGather.create_from_handle(g.export_handle(), r) for r in range(2)]
    pending = g.collect_async(7, timeout=5)
    assert not pending.done()
    with pytest.raises(RuntimeError, match="pending"):
        g.collect(7, timeout=0)
    with pytest.raises(RuntimeError, match="pending"):
        g.collect_async(8)
    w[1].reply(7, "b")
    w[0].reply(7, "a")
    deadline = time.monotonic() + 5
    while not pending.done():  # polls the rings, never waits
        assert time.monotonic() < deadline
        time.sleep(0.001)
    assert pending.result() == ["a", "b"]
    with pytest.raises(RuntimeError, match="already taken"):
        pending.result()
    w[0].reply(8, "single")
    assert g.collect_async(8, ranks=0, timeout=5).result() == ["single"]  # usable again
    for x in w:
        x.close()
    g.close()


def test_collect_async_errors_arrive_at_result():
    g = ringcast.ReplyGather(3)
    w = [ringcast.ReplyGather.create_from_handle(g.export_handle(), r) for r in range(3)]
    w[1].reply(4, 1)
    t0 = time.monotonic()
    pending = g.collect_async(4, timeout=0.1)
    with pytest.raises(TimeoutError, match=r"ranks 0, 2"):
        pending.result()
    assert time.monotonic() - t0 >= 0.1
    w[0].reply(3, "old")  # a reply to an earlier request
    with pytest.raises(ringcast.StaleReplyError, match="rank 0"):
        g.collect_async(5, ranks=0, timeout=5).result()
    with pytest.raises(ValueError, match="out of range"):
        g.collect_async(6, ranks=[3])
    for not_an_int in (0.0, "0", True):
        with pytest.raises(TypeError, match="rank must be an int"):
            ringcast.ReplyGather.create_from_handle(g.export_handle(), not_an_int)
        with pytest.raises(TypeError, match="n_ranks must be an int"):
            ringcast.ReplyGather(not_an_int)
    with pytest.raises(ValueError, match="n_ranks must be an int >= 1"):
        ringcast.ReplyGather(0)
    pending = g.collect_async(6, timeout=30)
    threading.Timer(0.05, g.close).start()
    with pytest.raises(ringcast.ClosedError):
        pending.result()
    # The collect ended closed, as a Future's result: asked again, the cause again (not "already taken")
    with pytest.raises(ringcast.ClosedError):
        pending.result()
    assert "closed" in repr(pending)
    for x in w:
        x.close()


def test_a_collect_that_ends_closed_keeps_the_replies_it_took():
    """Rank 1's worker closed its ring while rank 0's reply was in: ClosedError, and rank 0's reply is
    kept as after a timeout, so that a worker restarted in rank 1's place may answer the same tag."""
    g = ringcast.ReplyGather(2)
    h = g.export_handle()
    w0 = ringcast.ReplyGather.create_from_handle(h, 0)
    w0.reply(5, "r0")

    def rank_1(reply):  # a worker process of rank 1: replies (or not), then closes its ring and exits
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                w1 = ringcast.ReplyGather.create_from_handle(h, 1)
                if reply is not None:
                    w1.reply(5, reply)
                w1.close()
                code = 0
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert status == 0

    rank_1(None)
    with pytest.raises(ringcast.ClosedError, match="rank 1"):
        g.collect(5, timeout=5)
    rank_1("r1")  # restarted in rank 1's place
    assert g.collect(5, timeout=5) == ["r0", "r1"], "rank 0's reply was consumed by the closed collect"
    w0.close()
    g.close()


def test_a_look_at_a_pending_collect_from_a_signal_handler_leaves_it_pending():
    """A signal handler that logs the pending collect (repr, done()) while result() waits, then raises
    KeyboardInterrupt: the collect is still pending, result() may be called again, and the gather
    goes on collecting."""
    import signal
    g = ringcast.ReplyGather(2)
    w = [ringcast.ReplyGather.create_from_handle(g.export_handle(), r) for r in range(2)]
    w[0].reply(7, "r0")
    pending = g.collect_async(7, timeout=30)
    seen = []

    def on_alarm(signum, frame):
        seen.append((repr(pending), pending.done()))
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, on_alarm)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.2)
        with pytest.raises(KeyboardInterrupt):
            pending.result()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert seen and seen[0][1] is False, seen
    w[1].reply(7, "r1")
    assert pending.result() == ["r0", "r1"]
    for r in range(2):
        w[r].reply(8, r)
    assert g.collect(8, timeout=5) == [0, 1]
    for x in w:
        x.close()
    g.close()


_INTERRUPTS = []


def _unpickle_interrupting_once():
    if _INTERRUPTS:
        _INTERRUPTS.pop()
        raise KeyboardInterrupt("Ctrl-C while the replies were unpickled")
    return "r1"


class _InterruptsOnce:
    def __reduce__(self):
        return (_unpickle_interrupting_once, ())


def test_ctrl_c_while_result_unpickles_the_last_replies_leaves_the_collect_pending():
    """Both replies are in before result(): nothing is unpickled early, and a KeyboardInterrupt while
    result() unpickles them comes after the core collect ended. The collect is still pending, as for an
    interrupt during the wait: result() again returns every reply."""
    g = ringcast.ReplyGather(2)
    w = [ringcast.ReplyGather.create_from_handle(g.export_handle(), r) for r in range(2)]
    w[0].reply(3, "r0")
    w[1].reply(3, _InterruptsOnce())
    pending = g.collect_async(3, timeout=5)
    _INTERRUPTS.append(1)
    with pytest.raises(KeyboardInterrupt, match="unpickled"):
        pending.result()
    assert pending.result() == ["r0", "r1"]
    with pytest.raises(RuntimeError, match="already taken"):
        pending.result()
    for x in w:
        x.close()
    g.close()


def test_collect_async_left_pending_is_cleaned_up():
    """A ReplyGather dropped with a collect still pending (forever, never asked for) frees cleanly."""
    import gc

    g = ringcast.ReplyGather(1)
    g.collect_async(1)  # never answered, never asked for
    del g
    gc.collect()


def test_a_dropped_pending_collect_frees_the_gather_and_keeps_what_it_took():
    """A PendingReplies dropped without result() no longer blocks every later collect; the reply it took
    comes with the next collect of its tag. A closed gather says closed, whatever was pending."""
    g = ringcast.ReplyGather(2)
    w = [ringcast.ReplyGather.create_from_handle(g.export_handle(), r) for r in range(2)]
    w[0].reply(3, "a")
    p = g.collect_async(3, timeout=5)
    assert not p.done()  # it took rank 0's reply and waits for rank 1
    del p
    gc.collect()
    w[1].reply(3, "b")
    assert g.collect(3, timeout=5) == ["a", "b"]
    pending = g.collect_async(4, timeout=5)
    g.close()
    with pytest.raises(ringcast.ClosedError):
        g.collect(5, timeout=1)
    with pytest.raises(ringcast.ClosedError):
        g.collect_async(5, timeout=1)
    del pending
    for x in w:
        x.close()


def test_a_stale_handle_is_refused_by_name():
    """A handle of a gather that is gone, or of one re-created under its name since, is refused saying
    so; the new gather's own handle attaches."""
    name = f"rc-stale-g-{os.getpid()}"
    g = ringcast.ReplyGather(2, name=name)
    old = g.export_handle()
    g.close()
    del g
    gc.collect()
    with pytest.raises(ValueError, match="stale handle: gather .* does not exist any more"):
        ringcast.ReplyGather.create_from_handle(old, 1)
    g2 = ringcast.ReplyGather(4, name=name, wait="futex")
    with pytest.raises(ValueError, match="stale handle: gather .* was re-created"):
        ringcast.ReplyGather.create_from_handle(old, 1)
    w = ringcast.ReplyGather.create_from_handle(g2.export_handle(), 1)
    w.reply(7, "fresh")
    assert g2.collect(7, 1, timeout=5) == ["fresh"]
    w.close()
    g2.close()


def test_an_overwritten_reply_ring_is_a_segment_error_not_a_stale_handle():
    """A gather whose rank-0 reply ring is there but overwritten: SegmentError naming the gather and the
    cause, not 'does not exist any more'."""
    g = ringcast.ReplyGather(2)
    h = g.export_handle()
    try:
        with open(f"/dev/shm/{h.name}.r0", "r+b") as f:
            f.write(b"\xff" * 8)  # the magic
        with pytest.raises(ringcast.SegmentError, match=f"cannot attach to gather '{h.name}'.*foreign magic") as e:
            ringcast.ReplyGather.create_from_handle(h, 1)
        assert "stale" not in str(e.value)
    finally:
        g.close()


def test_a_worker_waiting_for_room_is_told_its_executor_died():
    """A worker whose reply waits for room in its ring while the executor is killed gets PeerDeadError
    in its own terms: the executor, its rank, the gather."""
    import pickle
    import signal
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            g = ringcast.ReplyGather(1, max_reply_bytes=1024, liveness_interval=0.2)
            os.write(wfd, pickle.dumps(g.export_handle()))
            time.sleep(60)  # never collects
        finally:
            os._exit(1)
    os.close(wfd)
    handle = pickle.loads(os.read(rfd, 65536))
    os.close(rfd)
    w = ringcast.ReplyGather.create_from_handle(handle, 0)
    with pytest.raises(TimeoutError):
        for tag in range(10_000):
            w.reply(tag, b"x" * 512, timeout=0)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    t0 = time.monotonic()
    with pytest.raises(ringcast.PeerDeadError, match=r"as worker rank 0 of gather .*: the executor collecting "
                                                     r"the replies died"):
        w.reply(10_001, b"x" * 512, timeout=30)
    assert time.monotonic() - t0 < 5
    w.close()


def test_a_worker_joining_a_gather_whose_executor_was_killed_is_told_so():
    """A killed executor leaves its group's names behind: a worker attaching to them gets PeerDeadError
    naming the dead executor at once, not replies that fill a ring nobody reads."""
    import pickle
    import signal
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            g = ringcast.ReplyGather(2)
            os.write(wfd, pickle.dumps(g.export_handle()))
            time.sleep(60)
        finally:
            os._exit(1)
    os.close(wfd)
    handle = pickle.loads(os.read(rfd, 65536))
    os.close(rfd)
    live = ringcast.ReplyGather.create_from_handle(handle, 0)  # while it lives, a worker attaches
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    try:
        with pytest.raises(ringcast.PeerDeadError,
                           match=rf"worker rank 1 of gather '{handle.name}': the executor that collects its "
                                 rf"replies \(pid {pid}\) is dead"):
            ringcast.ReplyGather.create_from_handle(handle, 1)
    finally:
        live.close()
        for name in os.listdir("/dev/shm"):
            if name.startswith(handle.name + "."):
                os.unlink(os.path.join("/dev/shm", name))


def test_collect_async_is_refused_while_another_thread_collects():
    """A collect_async from a second thread while the first is inside collect() is refused at once
    (the one-thread rule), not accepted and left to fail at its first done() or result()."""
    g = ringcast.ReplyGather(1)
    w = ringcast.ReplyGather.create_from_handle(g.export_handle(), 0)
    got = []
    t = threading.Thread(target=lambda: got.append(g.collect(1, timeout=10)))
    t.start()
    try:
        time.sleep(0.2)  # the thread is inside collect, waiting (GIL released)
        with pytest.raises(RuntimeError, match="already in use by another thread"):
            g.collect_async(2, timeout=1)
    finally:
        w.reply(1, "one")
        t.join(10)
    assert got == [["one"]]
    p = g.collect_async(3, timeout=0.01)  # the refusal left nothing pending
    with pytest.raises(TimeoutError):
        p.result()
    w.close()
    g.close()


def test_a_finalized_pending_collect_leaves_a_later_one_alone():
    """A PendingReplies whose collect already ended (here: marked not taken, as an interrupt inside
    result() can leave it) does not abandon the collect begun after it when it is dropped; and
    timeouts of any real number type are taken, as the blocking calls take them."""
    import numpy as np
    g = ringcast.ReplyGather(1)
    w = ringcast.ReplyGather.create_from_handle(g.export_handle(), 0)
    a = g.collect_async(1, timeout=0.01)
    with pytest.raises(TimeoutError):
        a.result()
    a._taken = False
    b = g.collect_async(2, timeout=5)
    del a
    gc.collect()
    w.reply(2, "two")
    assert b.result() == ["two"]
    for t in (np.float32(0.01), np.int64(0)):
        w.wait_until_ready(timeout=t)
        with pytest.raises(TimeoutError):
            g.collect(3, timeout=t)
    w.close()
    g.close()


def test_an_empty_rank_list_asks_for_no_reply_and_numpy_ranks_count():
    """collect(tag, []) returns [] at once (it used to wait for every rank and take their replies);
    numpy integers are ranks like ints."""
    pytest.importorskip("numpy")
    g = ringcast.ReplyGather(2)
    w = ringcast.ReplyGather.create_from_handle(g.export_handle(), 1)
    try:
        assert g.collect(5, [], timeout=0.5) == []
        assert g.collect_async(5, [], timeout=0.5).result() == []
        w.reply(5, "one")
        pending = g.collect_async(5, [], timeout=0.5)
        assert pending.done() and pending.result() == []  # done() polls nothing: the reply stays

        async def awaited():
            return await g.collect_async(5, [], timeout=0.5)
        assert asyncio.run(awaited()) == []
        assert g.collect(5, np.int64(1), timeout=5) == ["one"]  # the reply was left for it
        w.reply(6, "again")
        assert g.collect_async(6, [np.int32(1)], timeout=5).result() == ["again"]
        with pytest.raises(TypeError, match="ranks must be"):
            g.collect(7, [np.bool_(True)], timeout=0)
        with pytest.raises(TypeError, match="ranks must be None, an int or a list of ints, got ndarray"):
            g.collect(7, np.array(1), timeout=0)  # 0-d: neither a rank nor an iterable
    finally:
        w.close()
        g.close()


def test_ranks_as_lists_tuples_and_ints_are_checked_as_any_others():
    """The plain int, list and tuple take a shortcut past the general checks (the hot path); what they
    hold is refused as the general path refuses it, and each form gets its replies."""
    g = ringcast.ReplyGather(2)
    w = [ringcast.ReplyGather.create_from_handle(g.export_handle(), r) for r in range(2)]
    try:
        for tag, ranks, replying in ((1, [0, 1], [0, 1]), (2, (1, 0), [1, 0]), (3, 1, [1]), (4, [], []),
                                     (5, iter([0]), [0])):
            for r in replying:
                w[r].reply(tag, f"a{r}")
            assert g.collect(tag, ranks, timeout=5) == [f"a{r}" for r in replying]
        for bad, error, text in (([0, True], TypeError, "got bool"), ((0, 1.0), TypeError, "got float"),
                                 ([0, 2], ValueError, "rank 2 out of range"), ((-1,), ValueError, "rank -1"),
                                 (2, ValueError, "rank 2 out of range"), (True, TypeError, "got bool")):
            with pytest.raises(error, match=text):
                g.collect(9, bad, timeout=0)
    finally:
        for x in w:
            x.close()
        g.close()


def test_a_bad_tag_or_timeout_is_named_in_the_callers_terms():
    """The hot paths hand their arguments to the binding unchecked; what it refuses is told as the bad
    tag or timeout (TypeError / ValueError), not as the binding's signatures."""
    g = ringcast.ReplyGather(2)
    w = ringcast.ReplyGather.create_from_handle(g.export_handle(), 1)
    try:
        with pytest.raises(ValueError, match=r"tag must be in 0\.\.2\*\*64-1, got -1$"):
            w.reply(-1, "x")
        with pytest.raises(ValueError, match="got 18446744073709551616"):
            g.collect(2**64)
        with pytest.raises(TypeError, match="tag must be an int, got str"):
            g.collect_async("x")
        with pytest.raises(TypeError, match="timeout must be a number of seconds or None, got str"):
            g.collect(1, timeout="x")
        # Any other TypeError of the call is its own, cause and all: one a __reduce__ raised, and a
        # binding's refusal inside the pickling (another call's "incompatible function arguments").
        with pytest.raises(TypeError, match="^refused$") as e:
            w.reply(1, _RefusesPickling())
        assert isinstance(e.value.__cause__, KeyError)
        with pytest.raises(TypeError, match=r"^segment_info\(\): incompatible function arguments"):
            w.reply(1, _CallsTheBindingWrongly())
    finally:
        w.close()
        g.close()


class _RefusesPickling:
    def __reduce__(self):
        raise TypeError("refused") from KeyError("the reason")


class _CallsTheBindingWrongly:
    def __reduce__(self):
        ringcast._core.segment_info(42)  # pybind11 refuses an int for a name


@pytest.mark.parametrize("how", ["collect", "collect_async"])
def test_a_tag_reused_every_step_returns_each_steps_replies_when_a_rank_answers_late(how):
    """Rank 1 answers after the collect began waiting: the collect took rank 0's reply in an earlier
    slice of its wait. Once it returned, that reply is not returned again by the next collect of the
    same tag (which would leave the new one in the ring, every later step a step behind)."""
    g = ringcast.ReplyGather(2)
    w = [ringcast.ReplyGather.create_from_handle(g.export_handle(), r) for r in range(2)]
    take = (lambda: g.collect(7, timeout=10)) if how == "collect" else (lambda: g.collect_async(7, timeout=10).result())
    for step in (1, 2, 3):
        w[0].reply(7, f"step {step}, rank 0")
        late = threading.Timer(0.2, w[1].reply, args=(7, f"step {step}, rank 1"))
        late.start()
        try:
            assert take() == [f"step {step}, rank 0", f"step {step}, rank 1"]
        finally:
            late.join()
    # Each reply was returned once: nothing of tag 7 is left, in the rings or kept.
    with pytest.raises(TimeoutError, match="ranks 0, 1"):
        g.collect(7, timeout=0)
    for x in w:
        x.close()
    g.close()


def test_a_signal_interrupts_a_reply_larger_than_a_record_that_nobody_collects():
    """A reply fragmented over many records (larger than the ring) blocks while nobody collects; a
    signal handler's exception (Ctrl-C's KeyboardInterrupt, here one of its own so that a reply deaf
    to it fails this test instead of ending the session) ends it at once, its fragments are withdrawn
    (a collect never returns them as a reply), and the worker's next replies arrive whole."""
    import signal

    class Interrupted(Exception):
        pass

    def handler(signum, frame):
        raise Interrupted()

    g = ringcast.ReplyGather(1, max_reply_bytes=0)  # the smallest ring (64 KiB)
    w = ringcast.ReplyGather.create_from_handle(g.export_handle(), 0)
    big = b"x" * (1 << 20)
    sent = []
    over = threading.Event()

    def interrupt():
        time.sleep(0.3)  # the reply is blocked by then (it fills the ring in microseconds)
        sent.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGINT)
        if not over.wait(5):
            w.close()  # a reply deaf to the signal: woken, so that the test fails instead of hanging

    previous = signal.signal(signal.SIGINT, handler)
    kicker = threading.Thread(target=interrupt)
    try:
        kicker.start()
        with pytest.raises(Interrupted):
            w.reply(1, big)
        raised = time.monotonic()
    finally:
        over.set()
        kicker.join()
        signal.signal(signal.SIGINT, previous)
    assert raised - sent[0] < 3, f"reply ended {raised - sent[0]:.1f} s after SIGINT"
    with pytest.raises(TimeoutError):
        g.collect(1, timeout=0.3)  # the withdrawn fragments are no reply
    w.reply(2, "after")
    assert g.collect(2, timeout=5) == ["after"]
    replying = threading.Thread(target=w.reply, args=(3, big))
    replying.start()
    assert g.collect(3, timeout=30) == [big]
    replying.join()
    w.close()
    g.close()


def test_done_of_a_pending_collect_is_refused_in_a_forked_child():
    """A forked child's done() would take the parent's replies from the rings: refused as its collect
    is, and the parent's result() gets them."""
    g = ringcast.ReplyGather(1)
    w = ringcast.ReplyGather.create_from_handle(g.export_handle(), 0)
    pending = g.collect_async(5, timeout=10)
    w.reply(5, "the reply")
    assert refused_in_a_forked_child(pending.done), "done() in the forked child was not refused"
    assert pending.result() == ["the reply"]
    w.close()
    g.close()


def test_a_queue_named_as_a_groups_bell_is_named_as_such():
    """A MessageQueue named "X.bell" takes the name a ReplyGather "X" needs for its doorbell: the
    refusal called the queue's segment "another program's object"."""
    name = f"rc-bellclash-{os.getpid()}"
    q = ringcast.MessageQueue(1, 1, name=f"{name}.bell", max_chunk_bytes=1024, max_chunks=4)
    try:
        with pytest.raises(ValueError, match=r"is a ringcast queue's segment .*not a doorbell") as e:
            ringcast.ReplyGather(1, name=name)
        assert "another program" not in str(e.value)
        assert not [n for n in os.listdir("/dev/shm") if n.startswith(f"{name}.r")], "the refused group left rings"
    finally:
        q.shutdown()


def test_an_interrupt_as_collect_async_started_its_collect_leaves_the_gather_usable():
    """A signal handler's exception (KeyboardInterrupt) raised as collect_start returned, before a
    PendingReplies held the collect it began: nobody could end it, and every later collect raised
    "already pending" (reproduced with real signals). Emulated at the same point: that collect is given
    up (its replies stay for the next collect of the tag), and the gather goes on."""
    g = ringcast.ReplyGather(1, sweep_abandoned=False)
    w = ringcast.ReplyGather.create_from_handle(g.export_handle(), 0)
    try:
        real = g._collect_start

        def collect_start_then_interrupt(*args):
            real(*args)
            raise KeyboardInterrupt("as collect_start returned")

        g._collect_start = collect_start_then_interrupt
        with pytest.raises(KeyboardInterrupt):
            g.collect_async(1)
        g._collect_start = real
        w.reply(1, "one")
        assert g.collect(1, timeout=5) == ["one"]
        w.reply(2, "two")
        assert g.collect_async(2, timeout=5).result() == ["two"]
    finally:
        w.close()
        g.close()
