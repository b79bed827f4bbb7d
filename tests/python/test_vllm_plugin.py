"""ringcast.vllm, the vLLM plug-in, against a stand-in vLLM (tests/python/vllm_standin/: vLLM's module
layout and call pattern; its own MessageQueue raises on any use).

The plug-in is found the way vLLM finds it, through the `vllm.general_plugins` entry point: the
installed package's (pip install), or, for the build tree (PYTHONPATH=<build>/python), a dist-info
written here from the entry point pyproject.toml declares.
"""
import importlib
import importlib.metadata
import os
import pickle
import re
import sys
import threading
import time
import types
from pathlib import Path

import pytest

import ringcast
import ringcast.vllm as rv

HERE = Path(__file__).resolve().parent
STANDIN = HERE / "vllm_standin"
SHM = "vllm.distributed.device_communicators.shm_broadcast"


def _declared_entry_point() -> str:
    text = (HERE.parent.parent / "pyproject.toml").read_text()
    section = text.split('[project.entry-points."vllm.general_plugins"]', 1)[1]
    match = re.search(r'^ringcast\s*=\s*"([^"]+)"', section, re.M)
    assert match, "pyproject.toml declares no ringcast entry in vllm.general_plugins"
    return match.group(1)


@pytest.fixture
def standin(tmp_path, monkeypatch):
    """The stand-in vLLM importable here and in spawned children, the plug-in discoverable; fresh vllm
    modules for each test, vLLM's classes back afterwards."""
    monkeypatch.syspath_prepend(str(STANDIN))
    found = [ep for ep in importlib.metadata.entry_points(group="vllm.general_plugins") if ep.name == "ringcast"]
    if not found:  # the build tree: no installed metadata
        dist = tmp_path / "site" / "ringcast_build_tree-0.0.dist-info"
        dist.mkdir(parents=True)
        (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: ringcast-build-tree\nVersion: 0.0\n")
        (dist / "entry_points.txt").write_text(f"[vllm.general_plugins]\nringcast = {_declared_entry_point()}\n")
        monkeypatch.syspath_prepend(str(tmp_path / "site"))
    importlib.invalidate_caches()
    eps = [ep for ep in importlib.metadata.entry_points(group="vllm.general_plugins") if ep.name == "ringcast"]
    assert [ep.value for ep in eps] == ["ringcast.vllm:register"]
    _forget_vllm()
    yield
    rv.uninstall()
    _forget_vllm()


def _forget_vllm():
    for name in [n for n in sys.modules if n == "vllm" or n.startswith("vllm.")]:
        del sys.modules[name]


# ---- the swap in one process ----------------------------------------------------------------------
def test_entry_point_swaps_every_binding(standin, monkeypatch):
    monkeypatch.setenv("VLLM_PLUGINS", "ringcast")
    import vllm.plugins
    import vllm.v1.executor.multiproc_executor as mpe  # imported Handle, MessageQueue by name before
    from vllm.distributed.device_communicators import shm_broadcast as shm

    originals = shm.MessageQueue, shm.Handle
    alias_module = type(sys)("standin_alias")  # `from ... import MessageQueue as MQ`
    alias_module.MQ = shm.MessageQueue
    sys.modules["standin_alias"] = alias_module
    try:
        vllm.plugins.load_general_plugins()
        assert vllm.plugins.loaded_names == ["ringcast"]
        assert shm.MessageQueue is rv.MessageQueue and shm.Handle is ringcast.Handle
        assert mpe.MessageQueue is rv.MessageQueue and mpe.Handle is ringcast.Handle
        assert alias_module.MQ is rv.MessageQueue
        assert rv.installed()
        assert rv.install() == []  # idempotent: nothing left to swap
        # uninstall puts vLLM's classes back everywhere
        changed = rv.uninstall()
        assert f"{SHM}.MessageQueue" in changed and "vllm.v1.executor.multiproc_executor.Handle" in changed
        assert (shm.MessageQueue, shm.Handle) == originals and mpe.MessageQueue is originals[0]
        assert alias_module.MQ is originals[0]
    finally:
        del sys.modules["standin_alias"]


def test_not_selected_leaves_vllm_alone(standin, monkeypatch):
    # VLLM_PLUGINS without ringcast: vLLM's own queue stays, and the stand-in's tripwire fires. This is
    # what every check below would meet if the swap did not happen.
    monkeypatch.setenv("VLLM_PLUGINS", "some_other_plugin")
    import vllm.plugins
    from vllm.distributed.device_communicators import shm_broadcast as shm
    from vllm.v1.executor.multiproc_executor import MultiprocExecutor

    vllm.plugins.load_general_plugins()
    assert vllm.plugins.loaded_names == []
    assert not rv.installed()
    with pytest.raises(AssertionError, match="did not replace it"):
        MultiprocExecutor(world_size=2)
    assert shm.MessageQueue.__module__ == SHM


def test_install_without_vllm_names_the_cause(monkeypatch):
    _forget_vllm()
    monkeypatch.setattr(sys, "path", [p for p in sys.path if "vllm_standin" not in p])
    with pytest.raises(ImportError, match="vllm"):
        rv.install()


# ---- vLLM's queue interface -----------------------------------------------------------------------
def _pair(max_chunk_bytes=1 << 16):
    q = rv.MessageQueue(1, 1, max_chunk_bytes=max_chunk_bytes, max_chunks=4)
    r = rv.MessageQueue.create_from_handle(q.export_handle(), 0)
    assert type(r) is rv.MessageQueue
    return q, r


def test_cancel_event_interrupts_a_blocked_dequeue():
    q, r = _pair()
    cancel = threading.Event()
    threading.Timer(0.2, cancel.set).start()
    guard = threading.Timer(10, r.shutdown)  # a cancel that does not work fails (ClosedError), never hangs
    guard.start()
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="cancelled"):
        r.dequeue(cancel=cancel, indefinite=True)
    guard.cancel()
    assert 0.15 < time.monotonic() - t0 < 2.0
    # A timeout still applies with a cancel event; a message is still delivered at once.
    with pytest.raises(TimeoutError):
        r.dequeue(timeout=0.12, cancel=threading.Event())
    q.enqueue({"step": 1})
    assert r.dequeue(timeout=5, cancel=threading.Event()) == {"step": 1}
    q.shutdown()
    r.shutdown()


@pytest.mark.parametrize("ending", ["reader shut down", "writer shut down"])
def test_an_event_set_then_the_queue_ended_is_a_cancel(ending):
    # vLLM's executor on shutdown or a worker's death: shutdown_event.set(), then every response
    # queue's shutdown(), while its main thread waits in dequeue(cancel=shutdown_event). The queue's
    # end wakes the slice the event was set in: cancelled, not ClosedError (raised before the fix).
    q, r = _pair()
    cancel = threading.Event()
    ended = threading.Event()

    def end():
        time.sleep(0.02)  # inside the first 50 ms slice
        cancel.set()
        (r if ending == "reader shut down" else q).shutdown()
        ended.set()

    threading.Thread(target=end).start()
    with pytest.raises(RuntimeError, match="cancelled"):
        r.dequeue(timeout=5, cancel=cancel)
    assert ended.wait(5)
    q.shutdown()
    r.shutdown()


def test_a_cancellable_dequeue_receives_a_device_message():
    """vLLM's worker loop reads with a cancel event: a message the writer sent as a device message (its
    CUDA arrays' chunks after it; here none, so no GPU is needed) took the plain path there and failed
    to unpickle ("unpickling stack underflow"); it is received as dequeue() receives it."""
    from ringcast import _gpu
    q, r = _pair()
    q._writer.send([_gpu._MAGIC, pickle.dumps([]), pickle.dumps({"step": 1})])
    assert r.dequeue(timeout=5, cancel=threading.Event()) == {"step": 1}
    q.enqueue({"step": 2})
    assert r.dequeue(timeout=5, cancel=threading.Event()) == {"step": 2}
    q.shutdown()
    r.shutdown()


def test_cancel_slices_lose_no_part_of_a_long_message():
    # A message far larger than the ring streams in records; slices of the cancellable wait end in the
    # middle of it, and the reader keeps what it took.
    q, r = _pair()
    big = bytes(range(256)) * (8 << 10)  # 2 MiB through a 256 KiB ring
    sender = threading.Thread(target=lambda: [q.enqueue(big) or time.sleep(0.0) for _ in range(3)])
    sender.start()
    for _ in range(3):
        assert r.dequeue(timeout=30, cancel=threading.Event()) == big
    sender.join()
    q.shutdown()
    r.shutdown()


class _Unpicklable:
    def __reduce__(self):
        return (_refuse_to_unpickle, ())


def _refuse_to_unpickle():
    raise ValueError("this message cannot be unpickled")


def test_a_cancellable_read_takes_what_a_dequeue_many_left_first():
    """dequeue_many stops before a message that fails to unpickle and leaves it (and what follows in
    its burst) for the next read: a dequeue or acquire_read with a cancel event takes from there too,
    not from the ring past them."""
    q, r = _pair()
    for m in ("a", _Unpicklable(), "c"):
        q.enqueue(m)
    with q.acquire_write(size=3) as v:
        v[:] = b"raw"
    assert r.dequeue_many(8, timeout=5) == ["a"]
    with pytest.raises(ringcast.RingcastError, match="dequeue_many"):
        with r.acquire_read(timeout=5, cancel=threading.Event()):
            pass
    with pytest.raises(ValueError, match="cannot be unpickled"):
        r.dequeue(timeout=5, cancel=threading.Event())
    assert r.dequeue(timeout=5, cancel=threading.Event()) == "c"
    with r.acquire_read(timeout=5, cancel=threading.Event()) as v:
        assert bytes(v) == b"raw"
    q.shutdown()
    r.shutdown()


def test_acquire_read_with_cancel():
    q, r = _pair()
    cancel = threading.Event()
    threading.Timer(0.1, cancel.set).start()
    guard = threading.Timer(10, r.shutdown)  # fails instead of hanging if the cancel is not seen
    guard.start()
    with pytest.raises(RuntimeError, match="cancelled"):
        with r.acquire_read(cancel=cancel):
            pass
    guard.cancel()
    with q.acquire_write(size=5) as buf:
        buf[:] = b"hello"
    with r.acquire_read(timeout=5, cancel=threading.Event()) as view:
        assert bytes(view) == b"hello"
    q.shutdown()
    r.shutdown()


def test_cpu_tensors_travel_out_of_band():
    torch = pytest.importorskip("torch")
    q, r = _pair(max_chunk_bytes=1 << 20)  # a 4 MiB ring holds the whole message
    t = torch.arange(1 << 16, dtype=torch.float32).reshape(256, 256)
    half = torch.arange(4096, dtype=torch.bfloat16)
    strided = t.t()  # not contiguous: sent as its values
    tiny = torch.tensor(3)  # below the threshold: stays in the pickle
    message = {"t": t, "half": half, "strided": strided, "tiny": tiny}
    parts = q._dumps(message)
    # The pickle holds no tensor bytes: three buffers out of band, the pickle itself small.
    assert len(parts) == 4 and len(parts[0]) < 2048
    assert sorted(memoryview(p).nbytes for p in parts[1:]) == sorted([t.numel() * 4, 4096 * 2, t.numel() * 4])
    q.enqueue(message)
    got = r.dequeue(timeout=5)
    for key in message:
        assert got[key].dtype == message[key].dtype and torch.equal(got[key], message[key]), key
    # enqueue itself (torch is loaded: the GPU path's pickler, which the plug-in gives its CPU tensor rule)
    q.enqueue(message)
    parts = r._reader.recv(5)
    assert len(parts) == 4 and len(parts[0]) < 2048
    got["t"][0, 0] = -1  # writable, and its own memory
    assert t[0, 0] == 0
    # Out of band is what vLLM's queue does too; the plain ringcast.MessageQueue pickles tensors in band.
    plain = ringcast.MessageQueue(1, 1, max_chunk_bytes=1 << 20, max_chunks=4)
    try:
        assert len(plain._dumps(message)) == 1
    finally:
        plain.shutdown()
    q.shutdown()
    r.shutdown()


def test_cpu_tensors_go_out_of_band_once_torch_loads_after_another_gpu_library(monkeypatch):
    """The binding keeps one device pickler per writer: one made while only another GPU array library
    was loaded (cupy, say) must still send CPU tensors out of band once torch is there."""
    torch = pytest.importorskip("torch")
    q, r = _pair(max_chunk_bytes=1 << 20)
    monkeypatch.setitem(sys.modules, "cupy", types.ModuleType("cupy"))
    monkeypatch.delitem(sys.modules, "torch")
    q.enqueue({"plain": 1})  # the device pickler is made (and kept) without torch
    assert r.dequeue(timeout=5) == {"plain": 1}
    monkeypatch.setitem(sys.modules, "torch", torch)
    t = torch.arange(1 << 14, dtype=torch.float32)
    q.enqueue({"t": t})
    parts = r._reader.recv(5)
    assert len(parts) == 2 and memoryview(parts[1]).nbytes == t.numel() * 4
    q.shutdown()
    r.shutdown()


def test_a_group_across_machines_reads_remote_ranks_over_zeromq():
    # Three ranks over vLLM's StatelessProcessGroup; rank 2 reports another machine: it reads the group's
    # broadcast over ZeroMQ while rank 1 reads shared memory, and its single-reader queue reaches rank 0
    # over ZeroMQ (tests/python/_vllm_workers.py).
    pytest.importorskip("torch")
    if not getattr(ringcast._core, "HAVE_REMOTE", False):
        pytest.skip("ringcast built without ZeroMQ (remote readers)")
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    port = _free_port()
    import _vllm_workers

    procs = [ctx.Process(target=_vllm_workers.two_node_rank, args=(r, 3, port, [2], str(STANDIN), results))
             for r in range(3)]
    for p in procs:
        p.start()
    try:
        out = {}
        for _ in range(3):
            rank, *rest = results.get(timeout=120)
            out[rank] = rest
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    for rank, (kind, ok, *_rest) in out.items():
        assert kind != "error", f"rank {rank}:\n{ok}"
    assert [out[r][0] for r in range(3)] == ["writer", "local", "remote"]
    assert all(out[r][1] for r in range(3)), out  # every broadcast arrived intact on every rank
    assert out[0][4] == [2]  # vLLM's numbering: the writer's group rank is no reader's
    assert out[0][2] == [("hello from", 0), ("hello from", 1), ("hello from", 2)]
    assert out[0][3] == 1  # rank 2's own queue reached rank 0 over ZeroMQ
    assert all(p.exitcode == 0 for p in procs)


def test_the_node_layout_of_a_group():
    # Which ranks read by shm: those on the writer's machine (vLLM's in_the_same_node_as).
    class Group:
        rank, world_size = 0, 3

        def all_gather_obj(self, obj):
            return [obj, ("another-boot-id", 1), obj]

        def broadcast_obj(self, obj, src):
            return obj

    assert rv._Group(Group()).same_node_as(0) == [True, False, True]
    assert rv._Group(Group()).same_node_as(1) == [False, True, False]
    with pytest.raises(TypeError, match="ProcessGroup"):
        rv.MessageQueue.create_from_process_group(object(), 1 << 20, 4)


def test_remote_readers_without_an_address_name_the_knob(monkeypatch):
    monkeypatch.delenv("VLLM_HOST_IP", raising=False)
    with pytest.raises(ValueError, match="VLLM_HOST_IP"):
        rv.MessageQueue(2, 1, max_chunk_bytes=1 << 16, max_chunks=4)


@pytest.mark.parametrize("answer", ["0.0.0.0", "::", ""])
def test_a_wildcard_host_address_is_refused_not_bound(monkeypatch, answer):
    # vLLM's get_ip() answers "0.0.0.0" on a node with no default route and no VLLM_HOST_IP/HOST_IP.
    network_utils = types.ModuleType("vllm.utils.network_utils")
    network_utils.get_ip = lambda: answer
    monkeypatch.setitem(sys.modules, "vllm.utils.network_utils", network_utils)
    with pytest.raises(ValueError, match="wildcard.*VLLM_HOST_IP.*connect_ip"):
        rv.MessageQueue(2, 1, max_chunk_bytes=1 << 16, max_chunks=4)
    network_utils.get_ip = lambda: "127.0.0.1"  # a real address still goes through
    assert rv.host_ip() == "127.0.0.1"
    # vLLM's executor passes connect_ip=get_ip() itself (positionally or by name): checked the same.
    with pytest.raises(ValueError, match="connect_ip gave.*wildcard"):
        rv.MessageQueue(2, 1, None, 1 << 16, 4, answer or "0.0.0.0")
    with pytest.raises(ValueError, match="connect_ip gave.*wildcard"):
        rv.MessageQueue(2, 1, max_chunk_bytes=1 << 16, max_chunks=4, connect_ip=answer or "::")


def test_a_host_name_for_the_publisher_is_refused_naming_its_source(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm.utils.network_utils", None)  # no vLLM: VLLM_HOST_IP is asked
    monkeypatch.setenv("VLLM_HOST_IP", "localhost")
    with pytest.raises(ValueError, match="VLLM_HOST_IP gave 'localhost', not a literal"):
        rv.MessageQueue(2, 1, max_chunk_bytes=1 << 16, max_chunks=4)
    with pytest.raises(ValueError, match="connect_ip gave 'localhost', not a literal"):
        rv.MessageQueue(2, 1, max_chunk_bytes=1 << 16, max_chunks=4, connect_ip="localhost")


# ---- the whole pattern: executor + spawned workers, torch.distributed gloo groups ------------------
def test_executor_and_workers_run_through_ringcast(standin, monkeypatch):
    torch = pytest.importorskip("torch")
    pytest.importorskip("torch.distributed")
    monkeypatch.setenv("VLLM_PLUGINS", "ringcast")
    import vllm.plugins
    from vllm.v1.executor.multiproc_executor import MultiprocExecutor

    vllm.plugins.load_general_plugins()  # the engine process, before the executor is built
    executor = MultiprocExecutor(world_size=2)
    try:
        assert type(executor.rpc_broadcast_mq) is rv.MessageQueue
        assert all(type(mq) is rv.MessageQueue for mq in executor.response_mqs)
        reports = executor.collective_rpc("swap_report", timeout=60)
        assert len({r["pid"] for r in reports}) == 2 and os.getpid() not in {r["pid"] for r in reports}
        for r in reports:  # every worker process: loaded the plug-in, and every binding is ringcast's
            assert r["plugins"] == ["ringcast"]
            for key in ("shm_broadcast.MessageQueue", "multiproc_executor.MessageQueue", "rpc_broadcast_mq",
                        "worker_response_mq", "mq_broadcaster"):
                assert r[key] == "ringcast.vllm", (key, r)
            assert r["shm_broadcast.Handle"] == r["multiproc_executor.Handle"] == "ringcast._queue"
            assert r["rpc_segment"] == executor.rpc_broadcast_mq.handle.name
        assert ringcast._core.segment_info(executor.rpc_broadcast_mq.handle.name)["readers"] == 2

        # Steps: a CPU tensor out to both workers and back from one of them.
        x = torch.arange(1 << 18, dtype=torch.float32)
        for step in range(3):
            (y,) = executor.collective_rpc("double", args=(x + step,), unique_reply_rank=0, timeout=60)
            assert torch.equal(y, (x + step) * 2)
        # create_from_process_group over the workers' gloo group (GroupCoordinator's broadcaster) ...
        assert executor.collective_rpc("group_broadcast", args=({"from": "group rank 0"},), timeout=60) == [
            {"from": "group rank 0"}] * 2
        # ... create_from_process_group_single_reader (every rank's queue read by group rank 0; the handles
        # only there) ...
        assert executor.collective_rpc("single_reader", timeout=60) == [[("hello from", 0), ("hello from", 1)], 0]
        # ... and over vLLM's StatelessProcessGroup, with writer_rank 1.
        port = _free_port()
        assert executor.collective_rpc("stateless_broadcast", args=(port, "via stateless group"), timeout=60) == [
            "via stateless group"] * 2
        with pytest.raises(RuntimeError, match="worker asked to fail"):
            executor.collective_rpc("fail", timeout=60)
    finally:
        executor.shutdown()
    assert all(p.exitcode == 0 for p in executor.procs)


def _free_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_acquire_read_with_cancel_refuses_a_view_that_outlives_the_block():
    # The cancel path peeks and releases by itself: a view derived from the block's one and kept past
    # the block raises there, and the chunk stays the reader's until that view is gone.
    q, r = _pair()
    with q.acquire_write(size=8) as buf:
        buf[:] = b"cancel-1"
    with pytest.raises(ringcast.RingcastError, match="outlived its with-block"):
        with r.acquire_read(timeout=5, cancel=threading.Event()) as view:
            kept = view[0:8]
    with pytest.raises(ringcast.RingcastError, match="still alive"):
        r.dequeue(timeout=0, cancel=threading.Event())
    assert bytes(kept) == b"cancel-1"
    del kept
    q.enqueue({"step": 2})
    assert r.dequeue(timeout=5, cancel=threading.Event()) == {"step": 2}
    q.shutdown()
    r.shutdown()


def test_a_bool_is_not_a_timeout_with_a_cancel_event_either():
    q, r = _pair()
    for flag in (True, False):
        with pytest.raises(TypeError, match="got bool"):
            r.dequeue(timeout=flag, cancel=threading.Event())
        with pytest.raises(TypeError, match="got bool"):
            with r.acquire_read(timeout=flag, cancel=threading.Event()):
                pass
    q.shutdown()
    r.shutdown()


def test_a_set_cancel_event_still_takes_what_is_there():
    """vLLM's queue looks at the cancel event only while it waits: a message or chunk already there is
    returned even with the event set (its executor's reader passes its shutdown event)."""
    q, r = _pair()
    cancel = threading.Event()
    cancel.set()
    q.enqueue({"reply": 1})
    assert r.dequeue(timeout=5, cancel=cancel) == {"reply": 1}
    with pytest.raises(RuntimeError, match="cancelled"):  # nothing there: the set event ends the wait
        r.dequeue(timeout=5, cancel=cancel)
    with q.acquire_write(size=3) as buf:
        buf[:] = b"abc"
    with r.acquire_read(timeout=5, cancel=cancel) as view:
        assert bytes(view) == b"abc"
    with pytest.raises(RuntimeError, match="cancelled"):
        with r.acquire_read(timeout=5, cancel=cancel):
            pass
    q.shutdown()  # a queue that ended, with the event set: cancelled, as before the event was looked at
    with pytest.raises(RuntimeError, match="cancelled"):
        r.dequeue(timeout=5, cancel=cancel)
    r.shutdown()


def test_a_cancellable_read_beside_a_dequeue_async_is_refused():
    """vLLM's cancellable dequeue and acquire_read read the ring themselves: like the base class's
    reads, they refuse to run while a dequeue_async of the reader waits (they would take its message)."""
    import asyncio
    q, r = _pair()
    out = []

    async def main():
        task = asyncio.ensure_future(r.dequeue_async(timeout=30))
        await asyncio.sleep(0.05)
        for read in (lambda: r.dequeue(timeout=0.2, cancel=threading.Event()),
                     lambda: r.acquire_read(timeout=0.2, cancel=threading.Event()).__enter__()):
            t = threading.Thread(target=lambda: out.append(_raised(read)))
            t.start()
            t.join(10)
        return await _delivered_to_the_await(q, task)

    _run_on_a_fresh_loop(main)
    assert out == ["RuntimeError: dequeue: dequeue_async of this reader is in progress on an event loop",
                   "RuntimeError: acquire_read: dequeue_async of this reader is in progress on an event loop"]
    q.shutdown()
    r.shutdown()


async def _delivered_to_the_await(q, task):
    """Enqueues one message and returns what the dequeue_async `task` received (must be that one)."""
    q.enqueue("for the await")
    got = await task
    assert got == "for the await"
    return got


def _run_on_a_fresh_loop(main):
    import asyncio
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(main())
    finally:
        loop.close()


def test_a_dequeue_async_that_starts_between_two_cancel_slices_stops_the_sliced_read():
    """A cancellable dequeue waits in slices; between two of them no thread is in the reader, so a
    dequeue_async can claim it there (forced here: the event's look between slices is slow). The
    sliced read's next slice is then refused, as its start would have been; it went on reading and
    took the message the await was waiting for."""
    import asyncio
    q, r = _pair()
    between_slices, await_waits = threading.Event(), threading.Event()

    class SlowLookEvent(threading.Event):
        looks = 0

        def is_set(self):
            SlowLookEvent.looks += 1
            if SlowLookEvent.looks == 2:  # the look before the second slice
                between_slices.set()
                await_waits.wait(5)
            return super().is_set()

    out = []
    reader = threading.Thread(target=lambda: out.append(_raised(lambda: r.dequeue(timeout=3, cancel=SlowLookEvent()))))
    reader.start()

    async def main():
        assert await asyncio.get_running_loop().run_in_executor(None, between_slices.wait, 5)
        task = asyncio.ensure_future(r.dequeue_async(timeout=10))
        await asyncio.sleep(0.05)  # claimed and waiting
        await_waits.set()
        await asyncio.get_running_loop().run_in_executor(None, reader.join, 10)
        return await _delivered_to_the_await(q, task)

    _run_on_a_fresh_loop(main)
    assert out == ["RuntimeError: dequeue: dequeue_async of this reader is in progress on an event loop"]
    q.shutdown()
    r.shutdown()


def _raised(call):
    try:
        call()
    except Exception as e:  # noqa: BLE001 — the outcome is the test's subject
        return f"{type(e).__name__}: {str(e).split(';')[0]}"
    return "no error"


def test_a_deadline_already_past_takes_what_is_there_as_vllm_does():
    """vLLM's executor reads each reply queue with timeout=deadline - now, negative once the deadline
    passed: its queue then returns a reply already there, else raises TimeoutError (never ValueError)."""
    q, r = _pair()
    for cancel in (None, threading.Event()):
        q.enqueue(("SUCCESS", 1))
        assert r.dequeue(timeout=-0.002, cancel=cancel) == ("SUCCESS", 1)
        with pytest.raises(TimeoutError):
            r.dequeue(timeout=-0.002, cancel=cancel)
    with q.acquire_write(size=2) as buf:
        buf[:] = b"ok"
    with r.acquire_read(timeout=-1) as view:
        assert bytes(view) == b"ok"
    with pytest.raises(ValueError):  # NaN is no deadline
        r.dequeue(timeout=float("nan"))
    q.shutdown()
    r.shutdown()


def test_vllms_later_signature_without_the_cancel_event():
    """vLLM since late 2025: dequeue(timeout=None, indefinite=False) and acquire_read(timeout, indefinite),
    the cancel event gone (a shutdown() from another thread ends the wait)."""
    q, r = _pair()
    q.enqueue("first")
    assert r.dequeue(5, True) == "first"  # positional: (timeout, indefinite)
    with pytest.raises(TimeoutError):
        r.dequeue(0.05, False)
    with q.acquire_write(size=1) as buf:
        buf[:] = b"x"
    with r.acquire_read(5, True) as view:
        assert bytes(view) == b"x"
    threading.Timer(0.2, r.shutdown).start()
    with pytest.raises(ringcast.ClosedError):
        r.dequeue(indefinite=True)
    q.shutdown()


def test_a_remote_reader_attached_with_rank_minus_one_as_vllms_multi_node_executor_does():
    """vLLM's queue takes every rank outside local_reader_ranks as a remote reader, and its multi-node
    executor attaches the workers' single-reader reply queues with rank -1."""
    if not getattr(ringcast._core, "HAVE_REMOTE", False):
        pytest.skip("ringcast built without ZeroMQ (remote readers)")
    q = rv.MessageQueue(1, 0, max_chunk_bytes=1 << 16, max_chunks=4, connect_ip="127.0.0.1")
    r = rv.MessageQueue.create_from_handle(q.export_handle(), -1)
    try:
        r.wait_until_ready(timeout=10)
        q.wait_until_ready(timeout=10)
        q.enqueue({"from": "worker"})
        assert r.dequeue(timeout=10) == {"from": "worker"}
    finally:
        r.shutdown()
        q.shutdown()
    # With more than one remote reader rank, -1 names none of them: refused, both lists named.
    q2 = rv.MessageQueue(3, 1, max_chunk_bytes=1 << 16, max_chunks=4, connect_ip="127.0.0.1")
    try:
        with pytest.raises(ValueError, match=r"rank -1 is not a local reader .* nor a remote one"):
            rv.MessageQueue.create_from_handle(q2.export_handle(), -1)
    finally:
        q2.shutdown()
