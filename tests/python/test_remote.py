"""Remote readers over ZeroMQ: vLLM's multi-node construction (n_reader > n_local_reader) on loopback.

Remote readers run in spawned processes, as on another machine (nothing shared but the handle).
"""
import gc
import hashlib
import multiprocessing as mp
import os
import pickle
import threading
import time

import pytest

import ringcast
from ringcast import _core
from _workers import refused_in_a_forked_child

pytestmark = pytest.mark.skipif(not getattr(_core, "HAVE_REMOTE", False), reason="ringcast built without ZeroMQ")


def _payload(i):
    # small objects and large out-of-band buffers (up to 3 MiB: several ring records, one ZeroMQ message)
    if i % 10 == 9:
        return bytes((i * 7 + k) % 251 for k in range(256)) * ((i * 997) % (3 * 4096) + 1)
    return {"step": i, "tokens": list(range(i % 50)), "blob": bytes(i % 300)}


def _digest(obj):
    return hashlib.sha256(pickle.dumps(obj, protocol=5)).hexdigest()


def _reader_proc(handle, rank, n, results):
    try:
        q = ringcast.MessageQueue.create_from_handle(handle, rank)
        q.wait_until_ready(timeout=20)
        h = hashlib.sha256()
        for i in range(n):
            obj = q.dequeue(timeout=30)
            assert _digest(obj) == _digest(_payload(i)), f"rank {rank}: message {i} differs"
            h.update(_digest(obj).encode())
        try:
            q.dequeue(timeout=30)
            results.put((rank, "no close"))
        except ringcast.ClosedError:
            results.put((rank, h.hexdigest()))
    except BaseException as e:  # reported, not lost in a child's stderr
        results.put((rank, f"{type(e).__name__}: {e}"))


def test_multinode_construction_two_local_two_remote_readers():
    n = 300
    writer = ringcast.MessageQueue(4, 2, local_reader_ranks=[0, 1], connect_ip="127.0.0.1",
                                   max_chunk_bytes=256 * 1024, max_chunks=4)
    handle = writer.export_handle()
    assert writer.n_remote_reader == 2 and handle.remote_reader_ranks == [2, 3]
    assert handle.remote_subscribe_addr.startswith("tcp://127.0.0.1:")
    assert not handle.remote_subscribe_addr.endswith(":0")
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    procs = [ctx.Process(target=_reader_proc, args=(handle, rank, n, results)) for rank in range(4)]
    for p in procs:
        p.start()
    try:
        writer.wait_until_ready(timeout=60)
        expect = hashlib.sha256()
        for i in range(n):
            writer.enqueue(_payload(i), timeout=30)
            expect.update(_digest(_payload(i)).encode())
        writer.shutdown()
        got = dict(results.get(timeout=60) for _ in procs)
        assert got == {rank: expect.hexdigest() for rank in range(4)}
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()


def test_wait_until_ready_names_the_missing_remote_ranks():
    writer = ringcast.MessageQueue(3, 1, connect_ip="127.0.0.1", max_chunk_bytes=64 * 1024, max_chunks=4)
    with pytest.raises(TimeoutError, match=r"reader rank\(s\) 0 never attached; remote reader rank\(s\) 1, 2 not "
                                           r"connected yet"):  # one error lists every missing rank
        writer.wait_until_ready(timeout=0.1)
    local = ringcast.MessageQueue.create_from_handle(writer.export_handle(), 0)
    remote = ringcast.MessageQueue.create_from_handle(writer.export_handle(), 1)
    remote.wait_until_ready(timeout=10)  # the handshake: the publisher welcomed rank 1
    t0 = time.monotonic()
    with pytest.raises(TimeoutError, match=r"remote reader rank\(s\) 2 did not connect"):
        writer.wait_until_ready(timeout=0.3)
    assert time.monotonic() - t0 < 3
    late = ringcast.MessageQueue.create_from_handle(writer.export_handle(), 2)
    writer.wait_until_ready(timeout=10)
    writer.enqueue("x")
    assert [q.dequeue(timeout=10) for q in (local, remote, late)] == ["x"] * 3
    for q in (local, remote, late):
        q.shutdown()
    writer.shutdown()


def test_remote_reader_handshake_timeout_names_the_endpoint():
    handle = ringcast.MessageQueue(2, 1, connect_ip="127.0.0.1").export_handle()  # writer collected at once
    handle.remote_subscribe_addr = "tcp://127.0.0.1:9"  # nothing listens there
    r = ringcast.MessageQueue.create_from_handle(handle, 1)
    with pytest.raises(TimeoutError, match="tcp://127.0.0.1:9"):
        r.wait_until_ready(timeout=0.2)


def test_remote_construction_errors():
    with pytest.raises(ValueError, match="connect_ip"):
        ringcast.MessageQueue(2, 1)
    for bad in ("localhost", "*"):
        with pytest.raises(ValueError, match="literal"):
            ringcast.MessageQueue(2, 1, connect_ip=bad)
    w = ringcast.MessageQueue(2, 1, connect_ip="127.0.0.1")
    with pytest.raises(ValueError, match="rank 7"):
        ringcast.MessageQueue.create_from_handle(w.export_handle(), 7)
    w.shutdown()


def test_blocked_remote_dequeue_releases_the_gil():
    writer = ringcast.MessageQueue(1, 0, connect_ip="127.0.0.1", max_chunk_bytes=64 * 1024, max_chunks=4)
    reader = ringcast.MessageQueue.create_from_handle(writer.export_handle(), 0)
    writer.wait_until_ready(timeout=10)
    count = 0
    stop = threading.Event()

    def spin():
        nonlocal count
        while not stop.is_set():
            count += 1

    t = threading.Thread(target=spin)
    t.start()
    time.sleep(0.05)
    before = count
    with pytest.raises(TimeoutError):
        reader.dequeue(timeout=0.5)
    during = count - before
    stop.set()
    t.join()
    # Holding the GIL for 0.5 s would leave the other thread a few switch intervals at most.
    assert during > 100_000, f"the other thread ran only {during} loops while dequeue blocked"
    writer.enqueue([1, 2, 3])
    assert reader.dequeue(timeout=10) == [1, 2, 3]
    writer.shutdown()
    with pytest.raises(ringcast.ClosedError):
        reader.dequeue(timeout=10)


def test_remote_dequeue_many_takes_a_burst_then_reports_the_close():
    writer = ringcast.MessageQueue(1, 0, connect_ip="127.0.0.1", max_chunk_bytes=64 * 1024, max_chunks=4)
    reader = ringcast.MessageQueue.create_from_handle(writer.export_handle(), 0)
    writer.wait_until_ready(timeout=10)
    for i in range(5):
        writer.enqueue({"i": i, "blob": b"x" * (100_000 if i == 2 else 10)})  # one fragmented message
    got = []
    deadline = time.monotonic() + 10
    while len(got) < 5 and time.monotonic() < deadline:
        batch = reader.dequeue_many(3, timeout=10)
        assert 1 <= len(batch) <= 3
        got += batch
    assert [m["i"] for m in got] == [0, 1, 2, 3, 4] and len(got[2]["blob"]) == 100_000
    writer.shutdown()
    with pytest.raises(ringcast.ClosedError):
        reader.dequeue_many(3, timeout=10)


def test_remote_reader_of_a_killed_writer_gets_peer_dead():
    ctx = mp.get_context("spawn")
    ready = ctx.Queue()
    p = ctx.Process(target=_writer_proc, args=(ready,))
    p.start()
    try:
        handle = ready.get(timeout=30)
        r = ringcast.MessageQueue.create_from_handle(handle, 0)
        r.wait_until_ready(timeout=10)
        assert r.dequeue(timeout=10) == "first"
        p.kill()
        t0 = time.monotonic()
        with pytest.raises(ringcast.PeerDeadError):
            r.dequeue(timeout=30)
        assert time.monotonic() - t0 < 3 * handle.liveness_interval + 1
    finally:
        p.kill()
        p.join()


def _writer_proc(ready):
    w = ringcast.MessageQueue(1, 0, connect_ip="127.0.0.1", liveness_interval=0.5)
    ready.put(w.export_handle())
    w.wait_until_ready(timeout=30)
    w.enqueue("first")
    time.sleep(60)


def _a_remote_reader_that_never_reads():
    """A writer with a local reader (rank 0) and a remote one (rank 1, which the test never reads
    from), the publisher's buffer one message deep: (writer, handle, local, remote), all ready."""
    w = ringcast.MessageQueue(2, 1, local_reader_ranks=[0], connect_ip="127.0.0.1", max_chunk_bytes=65536,
                              max_chunks=4, remote_high_water_mark=1)
    h = w.export_handle()
    local = ringcast.MessageQueue.create_from_handle(h, 0)
    remote = ringcast.MessageQueue.create_from_handle(h, 1)
    remote.wait_until_ready(timeout=10)
    w.wait_until_ready(timeout=10)
    return w, h, local, remote


def _send_until_the_publisher_holds_the_ring(w, local):
    with pytest.raises(TimeoutError, match="the publisher to the remote readers did not free ring space"):
        for _ in range(3000):
            w.enqueue(b"x" * 200_000, timeout=0.5)
            local.dequeue(timeout=5)


def test_a_timed_out_enqueue_names_the_publisher_when_a_remote_reader_held_the_ring():
    """The ring rank past the local readers is the publisher to the remote ones: a timeout it caused
    says so, not 'rank index 1' (which a user reads as remote rank 1)."""
    w, h, local, slow = _a_remote_reader_that_never_reads()
    try:
        _send_until_the_publisher_holds_the_ring(w, local)
    finally:
        local.shutdown()
        slow.shutdown()
        del slow  # its goodbye (sent when it goes) ends the writer's drain towards it
        gc.collect()
        w.shutdown()


def test_a_remote_readers_shutdown_says_goodbye_at_once():
    """shutdown() of a remote reader kept alive lets the writer go on: the goodbye leaves at once (it
    used to wait for the object's garbage collection, so a reader shut down but still referenced held
    the ring for good); later calls raise ClosedError, rank and endpoint still answer."""
    w, h, local, slow = _a_remote_reader_that_never_reads()
    try:
        _send_until_the_publisher_holds_the_ring(w, local)
        slow.shutdown()  # `slow` stays referenced: no garbage collection says goodbye for it
        for i in range(200):  # more than the ring and the publisher's buffers hold
            w.enqueue(b"x" * 200_000, timeout=5)
            local.dequeue(timeout=5)
        assert w._publisher.stats()["left_ranks"] == [1]  # a goodbye, not a lost connection
        with pytest.raises(ringcast.ClosedError):
            slow.dequeue(timeout=1)
        assert slow._reader.rank == 1 and slow._reader.endpoint == h.remote_subscribe_addr
    finally:
        local.shutdown()
        w.shutdown()


def test_shutdown_before_every_remote_rank_connected_delivers_everything_to_the_connected_ones():
    """A remote rank that never connects must not cost the connected ones their messages: shutdown()
    waits for it only a bounded grace (RemotePublisherOptions::missing_ranks_grace, 1 s), then the
    connected remote reader gets every message and ClosedError (it used to get PeerDeadError, "the
    remote publisher was stopped before its queue was closed", and nothing). Local ranks 0, 1 never
    attach either: they do not matter to the publisher."""
    w = ringcast.MessageQueue(4, 2, local_reader_ranks=[0, 1], connect_ip="127.0.0.1")
    r2 = ringcast.MessageQueue.create_from_handle(w.export_handle(), 2)
    r2.wait_until_ready(timeout=10)
    sent = [{"i": i} for i in range(100)] + [bytes([i]) * (1 << 20) for i in range(5)]
    for obj in sent:
        w.enqueue(obj, timeout=5)  # rank 3 never connects: the ring holds them
    took = []

    def shut_down():  # in another thread: the reader reads meanwhile, as on another machine
        t0 = time.monotonic()
        w.shutdown()
        took.append(time.monotonic() - t0)

    t = threading.Thread(target=shut_down)
    t.start()
    got = [r2.dequeue(timeout=10) for _ in sent]
    t.join(30)
    assert got == sent
    assert took and 0.9 < took[0] < 10, f"shutdown took {took} s (grace for the missing rank: 1 s)"
    with pytest.raises(ringcast.ClosedError):
        r2.dequeue(timeout=10)
    r2.shutdown()


def test_shutdown_of_an_empty_queue_does_not_wait_for_a_remote_rank_that_never_connected():
    """Nothing was enqueued: nobody can miss a message, so shutdown() does not wait for rank 3 (a
    start-up that failed in wait_until_ready ends at once), and rank 2 gets ClosedError."""
    w = ringcast.MessageQueue(4, 2, local_reader_ranks=[0, 1], connect_ip="127.0.0.1")
    r2 = ringcast.MessageQueue.create_from_handle(w.export_handle(), 2)
    r2.wait_until_ready(timeout=10)
    with pytest.raises(TimeoutError, match=r"remote reader rank\(s\) 3"):
        w.wait_until_ready(timeout=0.1)
    t0 = time.monotonic()
    w.shutdown()
    assert time.monotonic() - t0 < 0.9
    with pytest.raises(ringcast.ClosedError):
        r2.dequeue(timeout=10)
    r2.shutdown()



def test_a_stopped_publisher_is_never_reported_ready():
    """The executor's wait for its remote ranks, ended by the publisher's stop (the queue's shutdown),
    raises ClosedError naming the stop and the rank that never connected — it returned as if every
    rank had connected, before or during the wait. The publisher's wait says the same before the stop
    ended it, and once every rank had connected too: a stopped publisher forwards nothing."""
    w = ringcast.MessageQueue(2, 0, connect_ip="127.0.0.1")
    r0 = ringcast.MessageQueue.create_from_handle(w.export_handle(), 0)
    r0.wait_until_ready(timeout=10)
    pub, outcome = w._publisher, []

    def wait(call):
        try:
            call(timeout=30)
            outcome.append(None)
        except BaseException as e:  # noqa: BLE001 — the test looks at it
            outcome.append(e)

    th = threading.Thread(target=wait, args=(pub.wait_ready,))
    th.start()
    t0 = time.monotonic()
    pub.stop()  # before or during the other thread's wait: the same error
    th.join(10)
    assert time.monotonic() - t0 < 5
    assert len(outcome) == 1 and isinstance(outcome[0], ringcast.ClosedError), outcome
    assert "was stopped" in str(outcome[0]) and "remote reader rank(s) 1 never connected" in str(outcome[0])
    with pytest.raises(ringcast.ClosedError, match=r"stopped \(the queue was shut down\); remote reader rank\(s\) 1"):
        pub.wait_ready(0)
    r0.shutdown()
    w.shutdown()

    # through the queue, a wait in another thread while the queue shuts down (either order: ClosedError)
    w = ringcast.MessageQueue(2, 0, connect_ip="127.0.0.1")
    outcome.clear()
    th = threading.Thread(target=wait, args=(w.wait_until_ready,))
    th.start()
    w.shutdown()
    th.join(10)
    assert len(outcome) == 1 and isinstance(outcome[0], ringcast.ClosedError), outcome

    # every rank connected, then stopped: not ready either
    w = ringcast.MessageQueue(1, 0, connect_ip="127.0.0.1")
    r0 = ringcast.MessageQueue.create_from_handle(w.export_handle(), 0)
    r0.wait_until_ready(timeout=10)
    w.wait_until_ready(timeout=10)
    w._publisher.stop()
    with pytest.raises(ringcast.ClosedError, match="stopped"):
        w._publisher.wait_ready(0)
    r0.shutdown()
    w.shutdown()


def test_a_forked_childs_copy_of_the_remote_publisher_is_refused_and_the_parent_goes_on():
    """The publisher is the writer's thread and socket: a forked child's copy has neither. Its wait is
    refused as every endpoint's call in a child is (the queue's own wait refuses the child's writer
    first, so the publisher's refusal — the binding's, and the core publisher's behind it — is taken
    here directly); its drain (True at once: nothing of the child's to drain) and stop, what a
    finalizer calls, leave the parent's publisher forwarding."""
    w = ringcast.MessageQueue(1, 0, connect_ip="127.0.0.1")
    r0 = ringcast.MessageQueue.create_from_handle(w.export_handle(), 0)
    try:
        r0.wait_until_ready(timeout=10)
        w.wait_until_ready(timeout=10)
        assert refused_in_a_forked_child(lambda: w._publisher.wait_ready(0.1)), "wait_ready in the child was not refused"
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = 0 if w._publisher.drain(0) is True else 2
                w._publisher.stop()
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        w.wait_until_ready(timeout=10)
        w.enqueue("after the child", timeout=10)
        assert r0.dequeue(timeout=10) == "after the child"
    finally:
        r0.shutdown()
        w.shutdown()

def test_a_remote_reader_may_connect_by_another_address_than_the_handles():
    """A writer bound to every interface exports the wildcard (no other machine can connect to it): a
    remote reader passes the address it reaches the writer by (remote_addr=); a local rank refuses it."""
    q = ringcast.MessageQueue(2, 1, connect_ip="0.0.0.0")
    h = q.export_handle()
    try:
        assert h.remote_subscribe_addr.startswith("tcp://0.0.0.0:")
        port = h.remote_subscribe_addr.rsplit(":", 1)[1]
        with pytest.raises(ValueError, match="remote_addr is for a remote reader rank"):
            ringcast.MessageQueue.create_from_handle(h, 0, remote_addr=f"tcp://127.0.0.1:{port}")
        r = ringcast.MessageQueue.create_from_handle(h, 1, remote_addr=f"tcp://127.0.0.1:{port}")
        local = ringcast.MessageQueue.create_from_handle(h, 0)
        q.wait_until_ready(timeout=20)
        r.wait_until_ready(timeout=20)
        q.enqueue("over loopback", timeout=10)
        assert r.dequeue(timeout=10) == "over loopback"
        assert local.dequeue(timeout=10) == "over loopback"
        r.shutdown()
        local.shutdown()
    finally:
        q.shutdown()


def _curve_reader_proc(handle, keys, results):
    try:
        q = ringcast.MessageQueue.create_from_handle(handle, 1, curve_public_key=keys[0], curve_secret_key=keys[1])
        q.wait_until_ready(timeout=3)
        results.put(q.dequeue(timeout=10))
        q.shutdown()
    except BaseException as e:  # reported, not lost in a child's stderr
        results.put(f"{type(e).__name__}: {e}")


@pytest.mark.skipif(not getattr(_core, "HAVE_REMOTE", False) or not hasattr(_core, "curve_keypair"),
                    reason="no CURVE")
def test_curve_allow_list_admits_the_readers_own_key_and_refuses_another():
    try:
        server_public, server_secret = _core.curve_keypair()
    except Exception as e:  # libzmq without libsodium
        pytest.skip(str(e))
    allowed, other = _core.curve_keypair(), _core.curve_keypair()
    writer = ringcast.MessageQueue(2, 1, local_reader_ranks=[0], connect_ip="127.0.0.1",
                                   curve_secret_key=server_secret, curve_allowed_clients=[allowed[0]])
    handle = writer.export_handle()
    assert handle.remote_curve_public_key == server_public
    with pytest.raises(ValueError, match="remote reader rank"):  # rank 0 reads through shared memory
        ringcast.MessageQueue.create_from_handle(handle, 0, curve_public_key=allowed[0], curve_secret_key=allowed[1])
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    refused = ctx.Process(target=_curve_reader_proc, args=(handle, other, results))
    refused.start()
    try:
        got = results.get(timeout=60)
        assert isinstance(got, str) and got.startswith(("TimeoutError", "PeerDeadError")), got
        assert "curve_allowed_clients" in got, got  # the error names the refused key as a cause
    finally:
        refused.join(timeout=30)
    admitted = ctx.Process(target=_curve_reader_proc, args=(handle, allowed, results))
    admitted.start()
    local = ringcast.MessageQueue.create_from_handle(handle, 0)
    try:
        writer.wait_until_ready(timeout=30)
        writer.enqueue("for the allowed key", timeout=10)
        assert results.get(timeout=60) == "for the allowed key"
        assert local.dequeue(timeout=10) == "for the allowed key"
    finally:
        admitted.join(timeout=30)
        local.shutdown()
        writer.shutdown()
