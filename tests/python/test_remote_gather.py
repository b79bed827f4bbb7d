"""ReplyGather with remote ranks: workers on "other machines" reply over ZeroMQ; one collect covers all.

The remote workers run in spawned processes that get handles whose shared-memory names are replaced
by names that do not exist: any access to the executor's /dev/shm would fail there, so they can only
reach the executor over ZeroMQ, as from another machine. Loopback (127.0.0.1) stands in for the network.
"""
import copy
import dataclasses
import errno
import gc
import hashlib
import multiprocessing as mp
import os
import pickle
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

import ringcast
from _workers import refused_in_a_forked_child
from ringcast import _core

pytestmark = pytest.mark.skipif(not getattr(_core, "HAVE_REMOTE", False), reason="ringcast built without ZeroMQ")

STALE_STEP = 7      # rank 3 first answers this step with a wrong tag
SLOW_STEP = 11      # rank 2 answers this step late (the executor's short collect times out)
SLOW_REPLY_S = 1.0


def _digest(obj):
    return hashlib.sha256(pickle.dumps(obj, protocol=5)).hexdigest()


def _step_payload(step):
    return {"step": step, "blob": bytes((step * 31 + k) % 251 for k in range(step * 997 % 70000))}


def _unmappable(handle):
    """The handle as another machine would use it: its /dev/shm name does not exist here."""
    if dataclasses.is_dataclass(handle) and getattr(type(handle), "__dataclass_params__").frozen:
        return dataclasses.replace(handle, name="ringcast-not-on-this-node")
    h = copy.copy(handle)
    h.name = "ringcast-not-on-this-node"
    return h


def _worker(mq_handle, g_handle, rank, remote, results):
    try:
        if remote:
            mq_handle, g_handle = _unmappable(mq_handle), _unmappable(g_handle)
        mq = ringcast.MessageQueue.create_from_handle(mq_handle, rank)
        g = ringcast.ReplyGather.create_from_handle(g_handle, rank)
        assert (g._remote is not None) == remote and (g._worker is None) == remote, repr(g)
        mq.wait_until_ready(timeout=20)
        g.wait_until_ready(timeout=20)
        steps = 0
        while True:
            obj = mq.dequeue(timeout=30)
            if obj is None:
                break
            step = obj["step"]
            assert obj == _step_payload(step), f"rank {rank}: step {step} differs"
            if rank == 3 and step == STALE_STEP:
                g.reply(step + 1000, "stale")
            if rank == 2 and step == SLOW_STEP:
                time.sleep(SLOW_REPLY_S)
            g.reply(step, (rank, step, _digest(obj), os.getpid()))
            steps += 1
        g.close()
        results.put((rank, steps))
    except BaseException as e:  # reported, not lost in a child's stderr
        results.put((rank, f"{type(e).__name__}: {e}"))


def test_one_collect_over_local_and_remote_workers_with_tags_and_timeouts():
    """vLLM's shape: the executor broadcasts each step to 2 local + 2 remote ranks and collects the 4
    replies with ONE collect; a stale tag from a remote rank raises StaleReplyError naming it; a late
    remote reply makes a short collect time out naming it, and the retry returns what was kept."""
    n_steps = 60
    mq = ringcast.MessageQueue(4, 2, local_reader_ranks=[0, 1], connect_ip="127.0.0.1",
                               max_chunk_bytes=256 * 1024, max_chunks=4)
    g = ringcast.ReplyGather(4, remote_ranks=[2, 3], connect_ip="127.0.0.1")
    gh = g.export_handle()
    assert gh.remote_ranks == (2, 3) and gh.remote_reply_addr.startswith("tcp://127.0.0.1:")
    assert not gh.remote_reply_addr.endswith(":0")
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(mq.export_handle(), gh, r, r >= 2, results)) for r in range(4)]
    for p in procs:
        p.start()
    try:
        mq.wait_until_ready(timeout=60)
        g.wait_until_ready(timeout=60)
        pids = {}
        for step in range(n_steps):
            obj = _step_payload(step)
            mq.enqueue(obj, timeout=30)
            if step == STALE_STEP:
                with pytest.raises(ringcast.StaleReplyError, match=r"rank 3"):
                    g.collect(step, timeout=30)
            if step == SLOW_STEP:
                t0 = time.monotonic()
                with pytest.raises(TimeoutError, match=r"waiting for ranks? (\d+, )*2\b"):
                    g.collect(step, timeout=0.3)
                assert time.monotonic() - t0 < SLOW_REPLY_S
            replies = g.collect(step, timeout=30)  # ONE wait over local and remote ranks
            for rank, (r, s, digest, pid) in enumerate(replies):
                assert (r, s, digest) == (rank, step, _digest(obj))
                assert pids.setdefault(rank, pid) == pid
        mq.enqueue(None)
        got = dict(results.get(timeout=60) for _ in procs)
        assert got == {rank: n_steps for rank in range(4)}
        assert len(set(pids.values())) == 4 and os.getpid() not in pids.values()
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
        mq.shutdown()
        g.close()


def test_a_remote_reply_wakes_the_one_wait_without_the_gil():
    """The bridge's thread writes a remote reply into the rank's reply ring, which rings the doorbell:
    the collector, asleep over [local 0, remote 1], wakes for it exactly as for a local reply — two
    sleeps for two late replies, none holding the GIL. A lost wake would leave it asleep until its
    liveness slice: more sleeps (4 with the bridge's ring writing without the doorbell, tried)."""
    g = ringcast.ReplyGather(2, wait="futex", remote_ranks=[1], connect_ip="127.0.0.1")
    local = ringcast.ReplyGather.create_from_handle(g.export_handle(), 0)
    remote = ringcast.ReplyGather.create_from_handle(_unmappable(g.export_handle()), 1)
    remote.wait_until_ready(timeout=10)
    g.wait_until_ready(timeout=10)
    out = []
    collector = threading.Thread(target=lambda: out.append(g.collect(3, timeout=5)))
    ringcast._core.gil_probe_reset()
    collector.start()
    for w, text, sleeps in ((remote, "b", 1), (local, "a", 2)):  # each once the collector sleeps
        end = time.monotonic() + 10
        while ringcast._core.gil_probe()[0] < sleeps:
            assert time.monotonic() < end, "the collector never went to sleep"
            time.sleep(0.001)
        time.sleep(0.05)
        w.reply(3, text)
    collector.join(10)
    assert out == [["a", "b"]]
    sleeps, holding = ringcast._core.gil_probe()
    assert sleeps == 2 and holding == 0, f"{sleeps} sleeps ({holding} holding the GIL) for two late replies"
    remote.close()
    g.close()


def test_asyncio_collect_is_woken_by_a_remote_reply():
    """ringcast.aio.collect over a local and a remote rank: the remote reply (written by the bridge
    thread) signals the collector's eventfd like a local one, so the await ends when it arrives, not
    at its timeout."""
    import asyncio

    import ringcast.aio as aio

    g = ringcast.ReplyGather(2, remote_ranks=[1], connect_ip="127.0.0.1")
    local = ringcast.ReplyGather.create_from_handle(g.export_handle(), 0)
    remote = ringcast.ReplyGather.create_from_handle(_unmappable(g.export_handle()), 1)
    remote.wait_until_ready(timeout=10)
    g.wait_until_ready(timeout=10)

    def late_replies():
        time.sleep(0.1)
        local.reply(1, "a")
        time.sleep(0.1)
        remote.reply(1, "b")  # the last one: only the bridge's write can end the await

    async def main():
        t = threading.Thread(target=late_replies)
        t0 = time.monotonic()
        t.start()
        out = await aio.collect(g, 1, timeout=10)
        t.join()
        return out, time.monotonic() - t0

    out, took = asyncio.run(main())
    assert out == ["a", "b"]
    assert took < 3, f"the await took {took:.2f} s: the remote reply did not wake the loop"
    remote.close()
    g.close()


def _remote_worker_then_pause(g_handle, rank, ready):
    g = ringcast.ReplyGather.create_from_handle(_unmappable(g_handle), rank)
    g.wait_until_ready(timeout=20)
    g.reply(1, "first")
    ready.put(os.getpid())
    time.sleep(120)


def test_killed_remote_worker_ends_a_collect_async_with_peer_dead():
    """A remote worker killed while the executor waits for it (a collect_async over a local and the
    remote rank): result() raises PeerDeadError naming the rank and the bridge, never a hang."""
    liveness = 0.5
    g = ringcast.ReplyGather(2, remote_ranks=[1], connect_ip="127.0.0.1", liveness_interval=liveness)
    local = ringcast.ReplyGather.create_from_handle(g.export_handle(), 0)
    ctx = mp.get_context("spawn")
    ready = ctx.Queue()
    p = ctx.Process(target=_remote_worker_then_pause, args=(g.export_handle(), 1, ready))
    p.start()
    try:
        pid = ready.get(timeout=60)
        local.reply(1, "a")
        assert g.collect(1, timeout=30) == ["a", "first"]
        local.reply(2, "a")
        killer = threading.Timer(0.2, os.kill, args=(pid, signal.SIGKILL))
        killer.start()
        pending = g.collect_async(2, timeout=30)  # (collect() itself: the next test)
        with pytest.raises(ringcast.PeerDeadError, match=r"remote worker rank\(s\) 1\b.*dropped") as err:
            pending.result()
        assert "tcp://127.0.0.1:" in str(err.value)
        p.join(10)
    finally:
        if p.is_alive():
            p.kill()
        p.join()
    g.close()


def test_dead_remote_worker_is_reported_within_the_liveness_interval_of_the_kill():
    liveness = 0.5
    g = ringcast.ReplyGather(1, remote_ranks=[0], connect_ip="127.0.0.1", liveness_interval=liveness)
    ctx = mp.get_context("spawn")
    ready = ctx.Queue()
    p = ctx.Process(target=_remote_worker_then_pause, args=(g.export_handle(), 0, ready))
    p.start()
    try:
        pid = ready.get(timeout=60)
        assert g.collect(1, timeout=30) == ["first"]
        os.kill(pid, signal.SIGKILL)
        t0 = time.monotonic()
        with pytest.raises(ringcast.PeerDeadError, match=r"rank\(s\) 0\b"):
            g.collect(2, timeout=30)
        took = time.monotonic() - t0
        assert took < liveness + 0.5, f"PeerDeadError {took:.2f} s after the kill (liveness {liveness} s)"
    finally:
        p.kill()
        p.join()
    g.close()


def test_clean_close_of_a_remote_worker_is_closed_error():
    g = ringcast.ReplyGather(2, remote_ranks=[1], connect_ip="127.0.0.1")
    local = ringcast.ReplyGather.create_from_handle(g.export_handle(), 0)
    remote = ringcast.ReplyGather.create_from_handle(_unmappable(g.export_handle()), 1)
    remote.wait_until_ready(timeout=10)
    remote.reply(5, "last words")
    remote.close()
    with pytest.raises(ringcast.ClosedError):
        remote.reply(6, "after close")
    local.reply(5, "a")
    assert g.collect(5, timeout=10) == ["a", "last words"]  # sent before the bye: delivered
    local.reply(6, "a")
    with pytest.raises(ringcast.ClosedError, match=r"rank 1") as err:
        g.collect(6, timeout=10)
    assert not isinstance(err.value, ringcast.PeerDeadError)
    g.close()


def _executor_then_pause(ready):
    g = ringcast.ReplyGather(1, remote_ranks=[0], connect_ip="127.0.0.1", liveness_interval=0.5)
    ready.put(g.export_handle())
    g.wait_until_ready(timeout=30)
    time.sleep(120)


def test_remote_worker_of_a_killed_executor_gets_peer_dead():
    ctx = mp.get_context("spawn")
    ready = ctx.Queue()
    p = ctx.Process(target=_executor_then_pause, args=(ready,))
    p.start()
    try:
        handle = ready.get(timeout=60)
        w = ringcast.ReplyGather.create_from_handle(_unmappable(handle), 0)
        w.wait_until_ready(timeout=10)
        p.kill()
        t0 = time.monotonic()
        with pytest.raises(ringcast.PeerDeadError, match="reply bridge"):
            while time.monotonic() - t0 < 10:
                w.reply(1, "x", timeout=1)
                time.sleep(0.05)
        assert time.monotonic() - t0 < 3 * handle.liveness_interval + 1
    finally:
        p.kill()
        p.join()


def test_wait_until_ready_names_the_missing_remote_rank_and_bad_construction_is_refused():
    g = ringcast.ReplyGather(3, remote_ranks=[1, 2], connect_ip="127.0.0.1")
    w1 = ringcast.ReplyGather.create_from_handle(_unmappable(g.export_handle()), 1)
    w1.wait_until_ready(timeout=10)
    with pytest.raises(TimeoutError, match=r"remote worker rank\(s\) 2 did not connect to tcp://127\.0\.0\.1:"):
        g.wait_until_ready(timeout=0.3)
    with pytest.raises(ValueError, match="already attached|live"):  # the bridge writes rank 2's ring
        ringcast.ReplyGather.create_from_handle(dataclasses.replace(g.export_handle(), remote_ranks=()), 2)
    w1.close()  # before the executor: the bye leaves at once (a worker outliving its bridge lingers 2 s)
    g.close()
    with pytest.raises(ValueError, match="connect_ip"):
        ringcast.ReplyGather(2, remote_ranks=[1])
    with pytest.raises(ValueError, match="out of range"):
        ringcast.ReplyGather(2, remote_ranks=[2], connect_ip="127.0.0.1")
    with pytest.raises(ValueError, match="duplicates"):
        ringcast.ReplyGather(2, remote_ranks=[1, 1], connect_ip="127.0.0.1")
    for bad in ("localhost", "*"):
        with pytest.raises(ValueError, match="literal"):
            ringcast.ReplyGather(2, remote_ranks=[1], connect_ip=bad)
    dead = ringcast.ReplyGather(1, remote_ranks=[0], connect_ip="127.0.0.1").export_handle()  # collected at once
    w = ringcast.ReplyGather.create_from_handle(dead, 0, remote_addr="tcp://127.0.0.1:9")  # nothing listens
    with pytest.raises(TimeoutError, match="no welcome"):
        w.wait_until_ready(timeout=0.2)
    with pytest.raises(TimeoutError, match=r"reply\(tag=3\) timed out after 0\.2 s, waiting for the reply bridge's "
                       r"welcome \(no answer to this worker's hello from tcp://127\.0\.0\.1:9\)"):
        w.reply(3, "unsent", timeout=0.2)


def test_a_remote_reply_that_times_out_says_it_waited_for_the_executor_to_collect():
    """Rank 1 is not collected: its small reply ring fills, then the bridge's window of further replies
    (16) waits in the bridge, and the next reply waits for credit. Its TimeoutError says so — how many
    replies wait to be written into the ring, and that the executor has not collected the rank — not
    only that it timed out. Then every reply is collected, whole and in order."""
    # A 5 s liveness (heartbeats every 1 s): a stalled CI machine does not turn the wait into PeerDeadError.
    g = ringcast.ReplyGather(2, remote_ranks=[1], connect_ip="127.0.0.1", max_reply_bytes=1024, liveness_interval=5)
    w1 = ringcast.ReplyGather.create_from_handle(_unmappable(g.export_handle()), 1)
    w1.wait_until_ready(timeout=10)
    w0 = ringcast.ReplyGather.create_from_handle(g.export_handle(), 0)  # noqa: F841 — the local rank attached
    g.wait_until_ready(timeout=10)
    reply = bytes(8 << 10)
    sent = 0
    with pytest.raises(TimeoutError) as raised:
        while sent < 1000:  # the ring holds a handful, the window 16 more (credit may come with a heartbeat)
            w1.reply(sent, reply, timeout=1)
            sent += 1
    assert 16 <= sent < 1000
    assert re.search(r"reply\(tag=%d\) timed out after 1 s, waiting for credit from the reply bridge at "
                     r"tcp://127\.0\.0\.1:\d+: 16 replies of rank 1 are not yet written into its reply ring "
                     r"\(the window is 16\): the ring stays full until the executor collects this rank" % sent,
                     str(raised.value)), str(raised.value)
    for tag in range(sent):
        assert g.collect(tag, ranks=[1], timeout=10) == [reply]
    w1.close()
    g.close()


def test_a_gather_whose_bridge_cannot_bind_leaves_nothing_in_dev_shm():
    """The reply bridge's bind fails (the port is taken): the constructor raises, and the group's
    objects are gone at once — not only once the exception (which holds the half-made object) is
    collected: a retry of the same name inside the except block was refused as "in use"."""
    import socket
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    name = f"ringcast-test-bindfail-{os.getpid()}"
    try:
        ringcast.ReplyGather(2, name=name, max_reply_bytes=1024, remote_ranks=[1], connect_ip="127.0.0.1",
                             remote_port=taken.getsockname()[1])
        raise AssertionError("the bridge bound a taken port")
    except OSError as e:  # as socket.bind's (it was a ValueError: the core's already_exists)
        assert e.errno == errno.EADDRINUSE and "cannot bind" in str(e), e
        assert not [n for n in os.listdir("/dev/shm") if n.startswith(name)]
        ringcast.ReplyGather(2, name=name, max_reply_bytes=1024).close()  # the retry in the except block
    finally:
        taken.close()


def test_a_stopped_bridge_is_never_reported_ready():
    """The executor's wait for its remote workers, ended by the bridge's stop (the gather's close),
    raises ClosedError naming the stop and the rank that never connected — it returned as if every
    rank had connected."""
    g = ringcast.ReplyGather(2, remote_ranks=[1], connect_ip="127.0.0.1")
    bridge, outcome = g._bridge, []

    def wait():
        try:
            bridge.wait_ready(timeout=30)
            outcome.append(None)
        except BaseException as e:  # noqa: BLE001 — the test looks at it
            outcome.append(e)

    th = threading.Thread(target=wait)
    th.start()
    t0 = time.monotonic()
    g.close()  # stops the bridge, before or during the other thread's wait: the same error
    th.join(10)
    assert time.monotonic() - t0 < 5
    assert len(outcome) == 1 and isinstance(outcome[0], ringcast.ClosedError), outcome
    assert "was stopped" in str(outcome[0]) and "remote worker rank(s) 1 never connected" in str(outcome[0])
    with pytest.raises(ringcast.ClosedError, match=r"reply bridge .* was stopped"):
        g.wait_until_ready(timeout=1)

def test_remote_gather_example_runs():
    """examples/remote_gather.py (shown in docs/remote.md) runs: one collect over a local and a remote rank."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run([sys.executable, os.path.join(root, "examples", "remote_gather.py")], capture_output=True,
                         text=True, timeout=120, env=dict(os.environ))
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [f"[{{'rank': 0, 'sum': {s}}}, {{'rank': 1, 'sum': {s}}}]" for s in (3, 6, 10)]


def test_a_remote_workers_wait_runs_signal_handlers_and_goes_on():
    """A signal whose Python handler returns, during a remote gather worker's wait (here for the
    bridge's welcome, which never comes): the handler runs and the wait goes on to its own timeout. A
    handler that raises ends the wait with its exception, as Ctrl-C does. (A zmq_poll interrupted by
    the signal raised RuntimeError('Interrupted system call'), and the GIL-released wait never ran
    the handlers.)"""
    g = ringcast.ReplyGather(2, remote_ranks=[1], connect_ip="127.0.0.1")
    # nobody listens at port 9: no welcome ever comes
    w = ringcast.ReplyGather.create_from_handle(g.export_handle(), 1, remote_addr="tcp://127.0.0.1:9")
    ran = []
    previous = signal.signal(signal.SIGALRM, lambda *a: ran.append(time.monotonic()))
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.1)
        t0 = time.monotonic()
        with pytest.raises(TimeoutError, match="no welcome"):
            w.wait_until_ready(timeout=0.6)
        assert ran and ran[0] - t0 < 0.4, "the handler did not run during the wait"
        assert time.monotonic() - t0 >= 0.6

        class Stop(Exception):
            pass

        def stop(*_):
            raise Stop

        signal.signal(signal.SIGALRM, stop)
        signal.setitimer(signal.ITIMER_REAL, 0.1)
        t0 = time.monotonic()
        with pytest.raises(Stop):
            w.wait_until_ready(timeout=10)
        assert time.monotonic() - t0 < 2
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        g.close()


def test_dropping_a_remote_worker_lets_other_threads_run():
    """A remote worker dropped after its bridge went away waits out ZeroMQ's linger (its bye cannot
    leave) without the GIL: another Python thread keeps running (it stalled for the whole ~2 s)."""
    g = ringcast.ReplyGather(2, remote_ranks=[1], connect_ip="127.0.0.1")
    w = ringcast.ReplyGather.create_from_handle(g.export_handle(), 1)
    w.wait_until_ready(timeout=10)
    w.reply(0, "r0")
    assert g.collect(0, ranks=[1], timeout=10) == ["r0"]
    g._bridge.stop()  # the executor's bridge goes (its host, say)
    ticks, stop = [], threading.Event()

    def ticker():
        while not stop.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.01)

    th = threading.Thread(target=ticker)
    th.start()
    try:
        time.sleep(0.1)
        del w
        gc.collect()
        time.sleep(0.1)
    finally:
        stop.set()
        th.join()
    longest = max(b - a for a, b in zip(ticks, ticks[1:]))
    assert longest < 0.5, f"another thread stalled {longest:.2f} s while the worker was dropped"
    g.close()


def test_a_remote_rank_not_being_collected_holds_up_no_other_rank():
    """Rank 1's reply does not fit its reply ring (8 MiB, the ring ~1 MiB) while the executor does not
    collect rank 1: the bridge keeps it and goes on serving rank 2, whose reply a collect of rank 2
    alone gets at once (it waited behind rank 1's for good: the bridge retried that write and read
    nothing else). Then rank 1's replies come whole and in their order."""
    g = ringcast.ReplyGather(3, remote_ranks=[1, 2], connect_ip="127.0.0.1")
    h = _unmappable(g.export_handle())
    w1 = ringcast.ReplyGather.create_from_handle(h, 1)
    w2 = ringcast.ReplyGather.create_from_handle(h, 2)
    w1.wait_until_ready(timeout=10)
    w2.wait_until_ready(timeout=10)
    w0 = ringcast.ReplyGather.create_from_handle(g.export_handle(), 0)  # noqa: F841 — the local rank attached: the executor's wait_until_ready waits for it
    g.wait_until_ready(timeout=10)
    big = bytes(range(256)) * (8 << 12)  # 8 MiB
    w1.reply(0, big)
    w1.reply(1, "rank 1's second")
    time.sleep(0.5)  # rank 1's big reply reached the bridge first
    w2.reply(0, "rank 2")
    t0 = time.monotonic()
    assert g.collect(0, ranks=[2], timeout=10) == ["rank 2"]
    assert time.monotonic() - t0 < 3, "rank 2's reply waited behind rank 1's"
    assert g.collect(0, ranks=[1], timeout=20) == [big]
    assert g.collect(1, ranks=[1], timeout=20) == ["rank 1's second"]
    w1.close()
    w2.close()
    g.close()


@pytest.mark.parametrize("small_first", [False, True])
def test_a_remote_reply_waiting_for_room_costs_no_cpu(small_first):
    """While rank 1's reply waits in the bridge for room in its ring (the rank not collected), the
    bridge sleeps in its poll on the ring's eventfd: the executor process uses no CPU to speak of (a
    first form that wrote on in 1 ms slices spun through them: a whole core). With a small reply
    first, the big one's fragments do not end at the ring's end: the room it waits for is that of its
    next fragment (it was asked for a bare header, found "room" and looked again every 1 ms). The
    replies then arrive whole."""
    import resource

    def cpu_s():
        u = resource.getrusage(resource.RUSAGE_SELF)
        return u.ru_utime + u.ru_stime

    g = ringcast.ReplyGather(2, remote_ranks=[1], connect_ip="127.0.0.1")
    w1 = ringcast.ReplyGather.create_from_handle(_unmappable(g.export_handle()), 1)
    w1.wait_until_ready(timeout=10)
    w0 = ringcast.ReplyGather.create_from_handle(g.export_handle(), 0)  # noqa: F841 — the local rank attached: the executor's wait_until_ready waits for it
    g.wait_until_ready(timeout=10)
    big = bytes(8 << 20)  # the ring holds ~1 MiB
    if small_first:
        w1.reply(7, "small")
    w1.reply(0, big)
    time.sleep(0.5)  # it reached the bridge, which filled the ring and waits
    before, t0 = cpu_s(), time.monotonic()
    time.sleep(1.0)
    used = (cpu_s() - before) / (time.monotonic() - t0)
    assert used < 0.02, f"the executor process used {100 * used:.1f} % of a core while the reply waited"
    if small_first:
        assert g.collect(7, ranks=[1], timeout=30) == ["small"]
    assert g.collect(0, ranks=[1], timeout=30) == [big]
    w1.close()
    g.close()


def test_a_remote_reply_larger_than_its_ring_then_a_close_reaches_the_collector():
    """A remote worker replies with more than its reply ring holds and closes at once (its bye follows
    the reply on the connection): the bridge holds what the ring had no room for, and the bye must not
    drop it — the collect gets the whole reply, and only the next one sees the rank closed."""
    g = ringcast.ReplyGather(2, remote_ranks=[1], connect_ip="127.0.0.1")
    w = ringcast.ReplyGather.create_from_handle(_unmappable(g.export_handle()), 1)
    w.wait_until_ready(timeout=10)
    w0 = ringcast.ReplyGather.create_from_handle(g.export_handle(), 0)  # noqa: F841 — the local rank attached: the executor's wait_until_ready waits for it
    g.wait_until_ready(timeout=10)
    big = bytes(range(256)) * (8 << 12)  # 8 MiB, the ring ~1 MiB
    w.reply(0, big)
    w.close()
    assert g.collect(0, ranks=[1], timeout=20) == [big]
    with pytest.raises(ringcast.ClosedError, match="rank"):
        g.collect(1, ranks=[1], timeout=10)
    g.close()


def test_a_second_thread_on_a_remote_worker_is_refused_not_interleaved():
    """A remote worker's ZeroMQ socket serves one thread: while one thread waits in the worker (here for
    a welcome that never comes), another thread's reply, close and liveness check raise RuntimeError.
    (They went through on the same socket at once, which lost replies without any error.)"""
    g = ringcast.ReplyGather(2, remote_ranks=[1], connect_ip="127.0.0.1")
    # nobody listens at port 9: the first thread's wait lasts its whole timeout
    w = ringcast.ReplyGather.create_from_handle(g.export_handle(), 1, remote_addr="tcp://127.0.0.1:9")
    entered, outcome = threading.Event(), []

    def wait():
        entered.set()
        try:
            w.wait_until_ready(timeout=0.9)
        except BaseException as e:
            outcome.append(e)

    th = threading.Thread(target=wait)
    th.start()
    try:
        entered.wait(10)
        time.sleep(0.2)  # the other thread is inside wait_until_ready, without the GIL
        for call in (lambda: w.reply(0, "r0"), w._remote.check_liveness, w.close):
            with pytest.raises(RuntimeError, match="in use by another thread"):
                call()
    finally:
        th.join()
        g.close()
    # its own timeout, or the liveness interval (1 s) of a bridge that never answered: not ours to end
    assert len(outcome) == 1 and isinstance(outcome[0], (TimeoutError, ringcast.PeerDeadError)), outcome


# ---- found by a review of the credit and duplicate-rank logic ---------------------------------------
def test_every_second_live_claimant_of_a_held_rank_is_refused_not_left_silent():
    """Two claimants of a rank whose worker is live: the bridge remembered one contender per rank, so
    their alternating hellos each found the other's and neither was ever answered — both ended in
    PeerDeadError blaming a gone collector, instead of ValueError (rank in use)."""
    g = ringcast.ReplyGather(1, remote_ranks=[0], connect_ip="127.0.0.1", liveness_interval=2.0)
    ep = g.export_handle().remote_reply_addr
    holder = _core.RemoteGatherWorker(ep, 0, liveness_s=2.0)
    holder.wait_ready(5)
    claimants = []
    for _ in range(2):
        claimants.append(_core.RemoteGatherWorker(ep, 0, liveness_s=2.0))
        time.sleep(0.1)
    outcomes = [None, None]

    def claim(i):
        try:
            claimants[i].wait_ready(10)
            outcomes[i] = "welcomed"
        except Exception as e:  # noqa: BLE001 - the type is what is checked
            outcomes[i] = f"{type(e).__name__}: {e}"

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    for o in outcomes:
        assert o is not None and o.startswith("ValueError") and "already held by a live remote worker" in o, outcomes
    holder.check_liveness()
    assert g._bridge.lost_ranks() == []
    for c in claimants:
        c.close()
    holder.close()
    g.close()


def test_a_closed_remote_worker_is_never_ready():
    g = ringcast.ReplyGather(1, remote_ranks=[0], connect_ip="127.0.0.1")
    w = ringcast.ReplyGather.create_from_handle(g.export_handle(), 0)
    w.wait_until_ready(5)
    w.close()
    with pytest.raises(ringcast.ClosedError, match="closed"):
        w.wait_until_ready(1)  # returned as ready
    g.close()


class _CuttableProxy:
    """A TCP relay between a remote worker and its bridge that can swallow what the worker sends and
    then reset the connection (ZeroMQ reconnects through it): replies lost with a broken connection."""

    def __init__(self, upstream_port):
        import socket
        self.socket = socket
        self.up = upstream_port
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(8)
        self.port = self.listener.getsockname()[1]
        self.swallow = False
        self.swallowed = 0
        self.pairs = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.listener.accept()
            except OSError:
                return
            u = self.socket.create_connection(("127.0.0.1", self.up))
            self.pairs.append((c, u))
            threading.Thread(target=self._relay, args=(c, u, True), daemon=True).start()
            threading.Thread(target=self._relay, args=(u, c, False), daemon=True).start()

    def _relay(self, a, b, upward):
        try:
            while True:
                data = a.recv(65536)
                if not data:
                    break
                if upward and self.swallow:
                    self.swallowed += len(data)
                    continue
                b.sendall(data)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.close()
            except OSError:
                pass

    def cut(self):
        for pair in self.pairs:
            for s in pair:
                try:
                    s.shutdown(self.socket.SHUT_RDWR)
                except OSError:
                    pass
        self.pairs = []

    def close(self):
        self.cut()
        self.listener.close()


def test_replies_lost_with_a_broken_connection_give_their_credit_back():
    """A worker may have 16 replies not yet in its ring (the bridge's credit). Replies lost in flight
    when the connection broke never reach the bridge: each held a unit of the window for good, and 16
    of them wedged the worker's reply() forever with no error anywhere (the bridge kept heartbeating
    it). Replies are numbered now and the worker's hellos count them: the credit comes back."""
    g = ringcast.ReplyGather(1, remote_ranks=[0], connect_ip="127.0.0.1", liveness_interval=5.0)
    ep = g.export_handle().remote_reply_addr
    proxy = _CuttableProxy(int(ep.rsplit(":", 1)[1]))
    w = _core.RemoteGatherWorker(f"tcp://127.0.0.1:{proxy.port}", 0, liveness_s=5.0)
    try:
        w.wait_ready(5)
        w.reply(1, pickle.dumps("one"))
        assert g.collect(1, timeout=5) == ["one"]
        proxy.swallow = True
        for tag in range(2, 18):  # a whole window, lost in flight
            w.reply(tag, pickle.dumps("lost"), timeout=2)
        deadline = time.monotonic() + 5
        while proxy.swallowed == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert proxy.swallowed > 0
        proxy.cut()
        proxy.swallow = False
        w.reply(18, pickle.dumps("after the break"), timeout=6)  # TimeoutError before: no credit, ever
        # What the relay had not yet swallowed when it cut (still queued in the worker's socket) goes
        # out again after the reconnect and is delivered late, uncounted: a collect of 18 may meet such
        # a reply of 2..17 first (StaleReplyError, the reply kept for its own tag) and then goes on.
        late = []
        for _ in range(17):
            try:
                got = g.collect(18, timeout=6)
                break
            except ringcast.StaleReplyError as e:
                late.append(str(e))
        else:
            pytest.fail(f"reply 18 never collected; late replies met: {late}")
        assert got == ["after the break"], late
        assert all(re.search(r"replied with tag ([2-9]|1[0-7]) while collecting tag 18", m) for m in late), late
    finally:
        w.close()
        g.close()
        proxy.close()


def test_a_remote_workers_reply_in_a_forked_child_is_refused_and_the_parent_goes_on():
    """A forked child's copy of a remote worker sent its reply on the parent's socket (or raised
    "zmq_recv: Interrupted system call"): refused as every endpoint's call in a child is, and the
    parent's worker and its collect go on."""
    g = ringcast.ReplyGather(1, remote_ranks=[0], connect_ip="127.0.0.1")
    w = ringcast.ReplyGather.create_from_handle(_unmappable(g.export_handle()), 0)  # over ZeroMQ
    try:
        w.wait_until_ready(timeout=10)
        assert refused_in_a_forked_child(lambda: w.reply(1, "from the child")), "reply() in the forked child was not refused"
        w.reply(1, "from the parent")
        assert g.collect(1, timeout=10) == ["from the parent"]
    finally:
        w.close()
        g.close()


def test_wait_until_ready_names_missing_remote_and_local_ranks_at_once():
    """With remote and local workers both missing, the timeout named only the remote ranks: the user
    fixed that and met the local ones next. One TimeoutError names both."""
    g = ringcast.ReplyGather(4, remote_ranks=[2, 3], connect_ip="127.0.0.1")
    try:
        with pytest.raises(TimeoutError) as e:
            g.wait_until_ready(timeout=0.3)
        said = str(e.value)
        assert "remote worker rank(s) 2, 3 did not connect" in said and "local worker rank(s) 0, 1 did not attach" in said, said
    finally:
        g.close()


def test_a_remote_workers_tag_that_is_not_an_integer_is_refused_as_a_local_workers():
    # The local path refuses it in the binding (a FastEntry: an int, not any number); the remote one
    # would have sent Fraction(7, 2) as tag 3.
    from fractions import Fraction
    g = ringcast.ReplyGather(1, remote_ranks=[0], connect_ip="127.0.0.1")
    try:
        w = ringcast.ReplyGather.create_from_handle(g.export_handle(), 0)
        try:
            with pytest.raises(TypeError, match="tag must be an int, got Fraction"):
                w.reply(Fraction(7, 2), "x", timeout=1)
        finally:
            w.close()
    finally:
        g.close()


def test_a_remote_workers_tag_follows_the_local_rule_integers_in_range():
    class Index:
        def __index__(self):
            return 5

    g = ringcast.ReplyGather(1, remote_ranks=[0], connect_ip="127.0.0.1")
    try:
        w = ringcast.ReplyGather.create_from_handle(g.export_handle(), 0)
        try:
            w.wait_until_ready(timeout=30)
            w.reply(Index(), "by __index__", timeout=5)  # taken, as the local path takes it
            assert g.collect(5, timeout=30) == ["by __index__"]
            for tag in (-1, 2**64):
                with pytest.raises(ValueError, match=r"tag must be in 0\.\.2\*\*64-1"):
                    w.reply(tag, "x", timeout=1)
        finally:
            w.close()
    finally:
        g.close()
