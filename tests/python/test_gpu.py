"""The GPU path of MessageQueue (docs/gpu.md): CUDA tensors travel by DMA through the registered ring.

Every test that needs a GPU skips with the reason (no GPU interop in this build, no torch, or the
runtime's own answer: e.g. cudaErrorInsufficientDriver (35) on a machine with the toolkit but no
driver). The others run everywhere: the tests of the GPU path's own chunk handling (a failed copy, a
shutdown during one) run it on host memory, with a stand-in for ringcast._gpucore.
"""
import os
import pickle
import ctypes
import random
import subprocess
import sys
import threading
import types

import pytest

import ringcast
from _workers import EnqueuesWhilePickled, np

MESSAGES = int(os.environ.get("RINGCAST_GPU_PY_MESSAGES", "300"))


def test_import_loads_no_gpu_library():
    """`import ringcast` (and a CPU enqueue/dequeue) load neither torch nor the GPU runtime module."""
    code = ("import sys, ringcast\n"
            "q = ringcast.MessageQueue(1, 1); r = ringcast.MessageQueue.create_from_handle(q.export_handle(), 0)\n"
            "q.enqueue({'a': [1, 2]}); assert r.dequeue(timeout=5) == {'a': [1, 2]}\n"
            "print(sorted(m for m in ('torch', 'cupy', 'ringcast._gpucore') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=os.environ)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", out.stdout


def test_device_message_marker_never_matches_an_ordinary_message(queue_pair):
    """Ordinary messages start with a pickle: a bytes object equal to the marker stays ordinary."""
    from ringcast import _gpu
    q, (r,) = queue_pair(1)
    for obj in (_gpu._MAGIC, [_gpu._MAGIC, b"x", b"y"], (_gpu._MAGIC,) * 3):
        q.enqueue(obj)
        assert r.dequeue(timeout=5) == obj


class _FakeDeviceArray:
    """Says it is a CUDA array (``__cuda_array_interface__``); never sent: the device path is replaced."""

    __cuda_array_interface__ = {"shape": (4,), "typestr": "<f4", "data": (0, False), "version": 3}


def _python_calls_in_gpu_module(fn):
    """How many Python function calls into ringcast/_gpu.py fn() makes (sys.setprofile)."""
    from ringcast import _gpu
    calls = [0]

    def profile(frame, event, arg):
        if event == "call" and frame.f_code.co_filename == _gpu.__file__:
            calls[0] += 1

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return calls[0]


def test_a_loaded_gpu_library_costs_no_python_call_per_pickled_object(queue_pair, monkeypatch):
    """With a GPU array library loaded, enqueue looks for device arrays without a Python call per
    object of the message (a persistent_id hook made one): the calls do not grow with its size.
    Plain data, numpy arrays (out of band) and classes arrive as sent."""
    monkeypatch.setitem(sys.modules, "cupy", types.ModuleType("cupy"))  # "loaded": may_hold_device_arrays()
    q, (r,) = queue_pair(1)
    small = {"ids": [f"req-{i}" for i in range(10)], "n": list(range(10))}
    large = {"ids": [f"req-{i}" for i in range(5000)], "n": list(range(5000)), "nested": [[i] for i in range(5000)]}
    counts = []
    for msg in (small, large):
        counts.append(_python_calls_in_gpu_module(lambda: q.enqueue(msg, timeout=5)))
        assert r.dequeue(timeout=5) == msg
    assert counts[0] == counts[1], counts
    mixed = {"a": np.arange(100_000), "types": (int, np.ndarray), "s": {1, 2}}
    q.enqueue(mixed, timeout=5)
    back = r.dequeue(timeout=5)
    assert (back["a"] == mixed["a"]).all() and back["types"] == mixed["types"] and back["s"] == mixed["s"]


def _python_calls(fn):
    """The Python functions fn() calls, by name (sys.setprofile; C functions are not counted)."""
    names = []

    def profile(frame, event, arg):
        if event == "call":
            names.append(frame.f_code.co_name)

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return names


def test_with_a_gpu_library_loaded_enqueue_is_one_binding_call(queue_pair, monkeypatch):
    """torch (or cupy, ...) loaded, as in every inference engine: enqueue of plain data pickles inside
    the binding with the device pickler and sends at once — no Python frame but enqueue's own (the
    path once ran ~3.5 us of Python per enqueue: closures, a BytesIO, the pickler's __init__). What
    arrives is what was sent, parts out of band included, pickles over the C pickler's 64 KiB frame
    (written in several pieces), large in-band bytes and bytearrays, and an enqueue nested in the
    pickling (another queue's message is sent first)."""
    monkeypatch.setitem(sys.modules, "cupy", types.ModuleType("cupy"))
    q, (r,) = queue_pair(1)
    q2, (r2,) = queue_pair(1)
    step = {"ids": [f"req-{i}" for i in range(40)], "n": list(range(40)), "f": 0.5, "s": {1, 2}}
    assert _python_calls(lambda: q.enqueue(step, timeout=5)) == ["<lambda>", "enqueue"]
    assert r.dequeue(timeout=5) == step
    # The writer reuses its pickler: each message must stand alone (its memo cleared after each dump),
    # and an enqueue nested in the pickling on the same queue makes a pickler of its own.
    q.enqueue(step, timeout=5)
    q.enqueue([EnqueuesWhilePickled(q, step), step], timeout=5)
    assert [r.dequeue(timeout=5) for _ in range(3)] == [step, step, ["outer", step]]
    big = {"many": [f"x{i}" for i in range(30_000)], "b": bytes(range(256)) * 800, "ba": bytearray(300_000),
           "a": np.arange(50_000), "nested": EnqueuesWhilePickled(q2, {"inner": np.arange(3)})}
    assert _python_calls(lambda: q.enqueue(big, timeout=5)).count("enqueue") == 2  # the nested one too
    inner = r2.dequeue(timeout=5)
    assert (inner["inner"] == np.arange(3)).all()
    back = r.dequeue(timeout=5)
    assert back["many"] == big["many"] and back["b"] == big["b"] and back["ba"] == big["ba"]
    assert (back["a"] == big["a"]).all() and back["nested"] == "outer"
    q.enqueue(step, timeout=5)  # after a large pickle (its pickler not kept), a small one as before
    assert r.dequeue(timeout=5) == step


def test_the_libraries_looked_for_are_the_same_in_python_and_in_the_binding(monkeypatch):
    """may_hold_device_arrays (the Python paths) spells DEVICE_ARRAY_LIBRARIES (the binding's list)
    out for speed: each name must turn it on, and nothing else."""
    from ringcast import _gpu
    for name in _gpu.DEVICE_ARRAY_LIBRARIES:
        monkeypatch.delitem(sys.modules, name, raising=False)
    assert not _gpu.may_hold_device_arrays()
    for name in _gpu.DEVICE_ARRAY_LIBRARIES:
        with monkeypatch.context() as m:
            m.setitem(sys.modules, name, types.ModuleType(name))
            assert _gpu.may_hold_device_arrays(), name


class _Found:
    """A stand-in for a device array, for a stand-in device pickler."""


class _Unpicklable:
    def __reduce__(self):
        raise ValueError("this one cannot be pickled")


def test_the_binding_hands_a_message_with_device_arrays_back_and_abandons_a_failed_one(queue_pair, monkeypatch):
    """Writer.send_object with the device pickler: a message whose pickling found arrays is returned
    unsent (pickle, out-of-band buffers, pickler) for the GPU path; a pickling that raises after
    finding some calls the pickler's abandon() (which gives back what describing them took), sends
    nothing and raises the pickling's error; without a GPU library loaded the pickler is not used."""
    import pickle as pickle_module
    abandoned = []

    class StandIn(pickle_module.Pickler):
        arrays = ()

        def reducer_override(self, obj):
            if isinstance(obj, _Found):
                self.arrays = [*self.arrays, obj]
                return (str, (f"array {len(self.arrays) - 1}",))
            return NotImplemented

        def abandon(self):
            abandoned.append(len(self.arrays))

    q, (r,) = queue_pair(1)
    q._writer.set_device_pickler(StandIn, ["cupy"])
    assert q._writer.send_object({"x": _Found()}, 5) is None  # cupy not loaded: pickle.dumps, sent
    assert r.dequeue(timeout=5)["x"].__class__ is _Found
    monkeypatch.setitem(sys.modules, "cupy", types.ModuleType("cupy"))
    found = _Found()
    data, oob, pickler = q._writer.send_object({"x": found, "a": np.arange(10_000)}, 5)
    assert pickler.arrays == [found] and len(oob) == 1
    back = pickle_module.loads(data, buffers=oob)
    assert back["x"] == "array 0" and (back["a"] == np.arange(10_000)).all()
    with pytest.raises(ValueError, match="cannot be pickled"):
        q._writer.send_object([_Found(), _Found(), _Unpicklable()], 5)
    assert abandoned == [2]
    with pytest.raises(TimeoutError):
        r.dequeue(timeout=0)  # nothing of either was sent
    q._writer.send_object({"plain": 1}, 5)
    assert r.dequeue(timeout=5) == {"plain": 1}


_REDUCED = []


class _CountsItsPickling:
    def __reduce__(self):
        _REDUCED.append(1)
        return (str, ("counted",))


def test_the_device_pickler_pickles_once_and_refers_to_each_array_once():
    """One pass: a __reduce__ runs once in a message with device arrays; each array is replaced by a
    reference the reader resolves to the array it rebuilt, the same array twice by one reference."""
    import io
    from ringcast import _gpu
    fake = _FakeDeviceArray()
    obj = {"before": _CountsItsPickling(), "arrays": [fake, fake], "after": np.arange(10)}
    out, oob = io.BytesIO(), []
    pickler = _gpu._DevicePickler(out, protocol=5, buffer_callback=lambda pb: oob.append(pb.raw()) or False)
    _REDUCED.clear()
    pickler.dump(obj)
    assert _REDUCED == [1]
    assert [a.meta for a in pickler.arrays] == [("array", (4,), "<f4", None, 16)]
    back = _gpu._DeviceUnpickler(io.BytesIO(out.getvalue()), oob, ["rebuilt 0"]).load()
    assert back["before"] == "counted" and back["arrays"] == ["rebuilt 0", "rebuilt 0"]
    assert (back["after"] == np.arange(10)).all()
    with pytest.raises(ringcast.RingcastError, match="without ringcast's reader"):
        pickle.loads(out.getvalue(), buffers=oob)


def test_gpu_module_leaves_core_exception_types_alone(queue_pair):
    """Loading ringcast._gpucore must not change how ringcast._core's errors reach Python (a global
    pybind11 exception translator in it once turned this ValueError into a RuntimeError)."""
    try:
        from ringcast import _gpucore  # noqa: F401
    except ImportError:
        pytest.skip("this ringcast was built without GPU interop: ringcast._gpucore is absent")
    q, _ = queue_pair(1)
    with pytest.raises(ValueError, match="already attached"):
        ringcast.MessageQueue.create_from_handle(q.export_handle(), 0)


def _require_gpu():
    try:
        from ringcast import _gpucore
    except ImportError:
        pytest.skip("this ringcast was built without GPU interop (RINGCAST_CUDA): ringcast._gpucore is absent")
    if not _gpucore.built("cuda"):
        pytest.skip("this ringcast was built without CUDA (RINGCAST_CUDA): only the HIP backend is compiled in")
    caps = _gpucore.probe(0)
    if not caps["usable"]:
        pytest.skip(f"no usable GPU: {caps['why_not']}")
    torch = pytest.importorskip("torch", reason="torch is not installed")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    return torch


def test_tensors_through_message_queue_two_reader_processes():
    """The issue's Python acceptance test: objects holding CUDA tensors of random sizes (1 KiB - 64
    MiB, random contents), two reader processes rebuilding them on their device and checking a
    device-side checksum the writer computed."""
    torch = _require_gpu()
    import multiprocessing as mp
    from _gpu_workers import gpu_reader, make_object
    ctx = mp.get_context("spawn")
    q = ringcast.MessageQueue(2, 2)
    results = ctx.Queue()
    procs = [ctx.Process(target=gpu_reader, args=(q.export_handle(), r, MESSAGES, results)) for r in (0, 1)]
    for p in procs:
        p.start()
    try:
        q.wait_until_ready(timeout=120)
        rng = random.Random(2026)
        total = 0
        for i in range(MESSAGES):
            obj = make_object(i, rng, "cuda:0")
            total += obj["t"].numel() * 8
            q.enqueue(obj, timeout=120)
        got = sorted(results.get(timeout=300) for _ in procs)
        print(f"{MESSAGES} objects, {total / 1e9:.2f} GB of tensor bytes, 2 readers")
        for rank, n, problems in got:
            assert n == MESSAGES and not problems, (rank, n, problems)
    finally:
        for p in procs:
            p.join(timeout=60)
        q.shutdown()


def test_cpu_objects_and_streams_while_torch_is_loaded(queue_pair):
    """With torch loaded, CPU objects still take the plain path, and a tensor written by a kernel on
    the current stream right before enqueue arrives complete (the copy follows the stream's work)."""
    torch = _require_gpu()
    q, (r,) = queue_pair(1, max_chunk_bytes=1 << 20, max_chunks=8)
    cpu = {"x": list(range(10)), "t": torch.arange(5)}
    q.enqueue(cpu, timeout=10)
    back = r.dequeue(timeout=10)
    assert back["x"] == cpu["x"] and torch.equal(back["t"], cpu["t"])
    for k in range(20):
        t = torch.empty(1 << 18, dtype=torch.float32, device="cuda")  # 1 MiB: fits the 8 MiB ring
        t.fill_(float(k))  # queued on the current stream; enqueue must copy after it
        t.mul_(2)
        q.enqueue({"k": k, "t": t}, timeout=10)
        got = r.dequeue(timeout=10, device=0)
        assert got["k"] == k and got["t"].is_cuda
        assert bool((got["t"] == 2 * k).all()), f"message {k}: bytes from before the kernel finished"
    # Non-contiguous and requires_grad tensors arrive as equal contiguous tensors.
    base = torch.arange(64, dtype=torch.float32, device="cuda").reshape(8, 8)
    q.enqueue([base.t(), base.clone().requires_grad_(True)], timeout=10)
    a, b = r.dequeue(timeout=10)
    assert torch.equal(a, base.t().contiguous()) and b.requires_grad


class _AnswersEveryName:
    """A config object whose __getattr__ answers any name it lacks (an attribute dict's default)."""

    def __init__(self, values):
        self.__dict__["values"] = values

    def __getattr__(self, name):
        return {}

    def __reduce__(self):  # (pickle would take the {} it answers for __setstate__ for one)
        return (_AnswersEveryName, (self.values,))


class _NotAnInterface:
    """A type with a __cuda_array_interface__ that is not one (no shape, typestr, data)."""

    @property
    def __cuda_array_interface__(self):
        return {"version": 3}

    def __eq__(self, other):
        return type(other) is _NotAnInterface


def test_objects_that_only_look_like_device_arrays_travel_as_objects_while_torch_is_loaded(queue_pair):
    """A device array is told by its type's protocols, as C looks up dunders, and by an interface that
    has what one needs: an object whose __getattr__ answers every name, and one whose interface lacks
    shape/typestr/data, are pickled as any other object, not taken for arrays (and refused)."""
    pytest.importorskip("torch", reason="torch is not installed")  # a GPU library loaded: the device pickler runs
    q, (r,) = queue_pair(1)
    q.enqueue({"config": _AnswersEveryName({"lr": 1}), "other": _NotAnInterface()}, timeout=10)
    back = r.dequeue(timeout=10)
    assert type(back["config"]) is _AnswersEveryName and back["config"].values == {"lr": 1}
    assert back["other"] == _NotAnInterface()


def test_a_timed_out_dequeue_resumes_the_device_message(queue_pair):
    """A dequeue that times out between a device message's chunks keeps what it received; the next
    dequeue finishes the same message (nothing lost, nothing duplicated)."""
    torch = _require_gpu()
    import threading
    q, (r,) = queue_pair(1, max_chunk_bytes=256 * 1024, max_chunks=4)  # records of 256 KiB
    t = torch.arange(8 << 20, dtype=torch.int64, device="cuda")  # 64 MiB: 256 chunks
    # ~0.1 s of GPU work queued on the current stream: the first chunk's copy follows it, so the
    # envelope (host bytes, sent first) is there well before any chunk and the polls below land in
    # the middle of the message for sure (an H200 run once had the writer ahead of every poll).
    if hasattr(torch.cuda, "_sleep"):
        torch.cuda._sleep(200_000_000)  # clock cycles: ~0.1 s at 2 GHz
    else:
        x = torch.ones((4096, 4096), device="cuda")
        for _ in range(50):
            x = x @ x
    sender = threading.Thread(target=q.enqueue, args=({"t": t, "after": 1},), kwargs={"timeout": 60})
    sender.start()
    got = None
    mid_message = 0
    while got is None:
        try:
            got = r.dequeue(timeout=0)  # polls: the writer is often between two chunks
        except TimeoutError:
            mid_message += r._gpu_pending is not None
    sender.join()
    assert torch.equal(got["t"], t) and got["after"] == 1
    print(f"finished after {mid_message} polls that timed out in the middle of the message")
    assert mid_message >= 1, "no poll landed between two chunks: the resume path was not exercised"


def test_a_device_message_withdrawn_part_way_is_reported_once(queue_pair):
    """A writer whose enqueue times out after some chunks: the reader gets a RingcastError naming the
    withdrawal, then the next message intact."""
    torch = _require_gpu()
    from ringcast import RingcastError
    q, (r,) = queue_pair(1, max_chunk_bytes=256 * 1024, max_chunks=4)  # a 1 MiB ring, nobody reading yet
    t = torch.ones(1 << 20, dtype=torch.int64, device="cuda")  # 8 MiB: cannot fit
    with pytest.raises(TimeoutError):
        q.enqueue({"t": t}, timeout=0.2)  # the envelope and the chunks that fit are out
    with pytest.raises(TimeoutError):
        r.dequeue(timeout=0.2)  # takes them, then waits for chunks that never come
    assert r._gpu_pending is not None
    q.enqueue({"next": 2}, timeout=5)
    with pytest.raises(RingcastError, match="withdrawn"):
        r.dequeue(timeout=5)
    assert r.dequeue(timeout=5) == {"next": 2}


class _ArrayInterfaceOnly:
    """A cupy-style array: nothing but ``__cuda_array_interface__`` (borrowed from a torch tensor)."""

    def __init__(self, tensor):
        self._tensor = tensor  # keeps the memory alive

    @property
    def __cuda_array_interface__(self):
        return self._tensor.__cuda_array_interface__


class _DLPackOnly:
    """An array exposing nothing but DLPack (``__dlpack__`` / ``__dlpack_device__``)."""

    def __init__(self, tensor):
        self._tensor = tensor

    def __dlpack__(self, stream=None, **kwargs):
        return self._tensor.__dlpack__(stream=stream, **kwargs)

    def __dlpack_device__(self):
        return self._tensor.__dlpack_device__()


def test_array_interface_and_dlpack_only_objects_come_back_on_the_readers_device(queue_pair):
    """Objects that expose only one protocol (no torch.Tensor, no other attribute) go in through
    MessageQueue.enqueue and come out as CUDA tensors on the reader's device, equal to what the
    producer's kernels wrote right before enqueue (the copy follows the stream the protocol names).
    Arrays larger than the ring (4 x 256 KiB records) travel in many chunks, sent from a thread."""
    torch = _require_gpu()
    import threading
    for wrapper in (_ArrayInterfaceOnly, _DLPackOnly):
        q, (r,) = queue_pair(1, max_chunk_bytes=256 * 1024, max_chunks=4)
        sources = {
            "f32": torch.empty((700, 500), dtype=torch.float32, device="cuda"),  # 1.4 MB: 6 chunks
            "i64": torch.empty(4099, dtype=torch.int64, device="cuda"),
            "u8": torch.empty((3, 5, 7), dtype=torch.uint8, device="cuda"),
            "f16": torch.empty(1000, dtype=torch.float16, device="cuda"),
            "b": torch.empty(33, dtype=torch.bool, device="cuda"),
        }
        for k, (key, t) in enumerate(sources.items()):  # queued on the current stream, not synchronized
            t.copy_(torch.arange(t.numel(), device="cuda").reshape(t.shape) % (7 + k))
        obj = {key: wrapper(t) for key, t in sources.items()}
        obj["plain"] = [1, "two"]
        assert not any(isinstance(v, torch.Tensor) for v in obj.values())
        sender = threading.Thread(target=q.enqueue, args=(obj,), kwargs={"timeout": 30})
        sender.start()
        got = r.dequeue(timeout=30, device=0)
        sender.join()
        assert got["plain"] == [1, "two"]
        for key, t in sources.items():
            back = got[key]
            assert isinstance(back, torch.Tensor), (wrapper.__name__, key, type(back))
            assert back.device == torch.device("cuda:0"), (wrapper.__name__, key, back.device)
            assert back.dtype == t.dtype and back.shape == t.shape, (wrapper.__name__, key, back.dtype, back.shape)
            assert torch.equal(back, t), f"{wrapper.__name__} {key}: the bytes differ"
        # Only contiguous arrays are sent: a transposed view is refused before anything goes out.
        with pytest.raises(ValueError, match="contiguous"):
            q.enqueue({"t": wrapper(sources["f32"].t())}, timeout=5)
        q.enqueue("after", timeout=5)
        assert r.dequeue(timeout=5) == "after"
        print(f"{wrapper.__name__}: {len(sources)} arrays rebuilt as torch tensors on cuda:0")


# ---- the GPU path's own logic on host memory -----------------------------------------------------
class _HostGpuCore:
    """Stands in for ringcast._gpucore on a machine without a GPU: a "device" array is a numpy array
    and a DMA a memmove, so the GPU path's chunk handling runs (and can fail) anywhere. The reader's
    next `fail_reads` copies raise."""

    def __init__(self):
        self.fail_reads = 0
        self.reads = 0
        self.copying = threading.Event()  # set by a reader's copy as it starts
        self.gate = None  # a threading.Event a reader's copy waits for

    @staticmethod
    def buffer_address(view):
        return np.frombuffer(view, dtype=np.uint8).ctypes.data  # the array is freed at once: view stays releasable

    def Registration(self, address, device, endpoint):  # noqa: N802 (the core's class name)
        core = self

        class Copier:
            def copy(self, dst, src, n, to_ring, stream):
                if not to_ring:
                    core.reads += 1
                    core.copying.set()
                    if core.gate is not None:
                        core.gate.wait(10)
                    if core.fail_reads:
                        core.fail_reads -= 1
                        raise RuntimeError("DMA failed (stand-in)")
                ctypes.memmove(dst, src, n)
        return Copier()


class _DeviceRef:
    def __init__(self, index):
        self.index = index

    def __reduce__(self):
        from ringcast import _gpu
        return (_gpu._device_array, (self.index,))


@pytest.fixture
def host_gpu(monkeypatch):
    pytest.importorskip("numpy")
    from ringcast import _gpu
    core = _HostGpuCore()
    monkeypatch.setattr(_gpu, "_gpucore", core)

    def allocate(meta, device):
        a = np.empty(meta[4], dtype=np.uint8)
        return a, a.ctypes.data, 0
    monkeypatch.setattr(_gpu, "_allocate", allocate)

    def send(q, source):
        pickler = types.SimpleNamespace(arrays=[_gpu._Array(("array", source.shape, "|u1", False, source.nbytes),
                                                            source.ctypes.data, source.nbytes, 0, 0, source)])
        _gpu.send_device_message(q, pickle.dumps({"a": _DeviceRef(0)}, protocol=5), [], pickler, 5)
    core.send = send
    return core


def test_a_failed_device_copy_is_retried_by_the_next_dequeue(queue_pair, host_gpu):
    """A copy ring -> device that raises keeps its chunk for the next dequeue, which completes the
    message with every byte in place."""
    q, (r,) = queue_pair(1, max_chunk_bytes=16 * 1024, max_chunks=4)
    source = np.arange(40_000, dtype=np.uint32).view(np.uint8)[:40_000].copy()
    host_gpu.send(q, source)
    host_gpu.fail_reads = 1
    with pytest.raises(RuntimeError, match="stand-in"):
        r.dequeue(timeout=5)
    got = r.dequeue(timeout=5)["a"]
    chunks = -(-source.nbytes // q._writer.max_reserve)
    assert (got == source).all() and chunks > 1 and host_gpu.reads == chunks + 1  # the failed one twice


def test_a_cancellable_vllm_dequeue_receives_a_device_message_across_its_slices(host_gpu):
    """vLLM's worker loop reads with a cancel event (ringcast.vllm): a device message far larger than
    the ring arrives chunk by chunk across that read's slices, whole, and the queue goes on."""
    import threading
    import ringcast.vllm as rv
    q = rv.MessageQueue(1, 1, max_chunk_bytes=16 * 1024, max_chunks=4)
    r = rv.MessageQueue.create_from_handle(q.export_handle(), 0)
    try:
        source = np.arange(100_000, dtype=np.uint32).view(np.uint8).copy()  # 400 KB through a 64 KiB ring
        sender = threading.Thread(target=host_gpu.send, args=(q, source))
        sender.start()
        got = r.dequeue(timeout=30, cancel=threading.Event())["a"]
        sender.join()
        assert (got == source).all()
        q.enqueue("after", timeout=5)
        assert r.dequeue(timeout=5, cancel=threading.Event()) == "after"
    finally:
        q.shutdown()
        r.shutdown()


def test_a_device_message_in_a_dequeue_many_burst_is_a_read_of_its_own(queue_pair, host_gpu):
    """A burst that reaches a device message returns what came before it; the device message is the
    next read's, and one whose copy failed is resumed once — never received a second time."""
    q, (r,) = queue_pair(1, max_chunk_bytes=16 * 1024, max_chunks=4)
    source = np.arange(40_000, dtype=np.uint32).view(np.uint8)[:40_000].copy()
    q.enqueue("before", timeout=5)
    host_gpu.send(q, source)
    q.enqueue("after", timeout=5)
    host_gpu.fail_reads = 1
    assert r.dequeue_many(8, timeout=5) == ["before"]
    with pytest.raises(RuntimeError, match="stand-in"):
        r.dequeue(timeout=5)
    with pytest.raises(ringcast.RingcastError, match="partly received"):  # its held chunk is not a message
        with r.acquire_read(timeout=0):
            pass
    assert (r.dequeue(timeout=5)["a"] == source).all()
    assert r.dequeue(timeout=5) == "after"
    with pytest.raises(TimeoutError):
        r.dequeue(timeout=0)


def test_a_reader_shut_down_after_a_failed_device_copy_gives_its_chunk_and_rank_back(queue_pair, host_gpu):
    """The chunk a failed copy kept for a retry would hold the writer for as long as the shut-down
    reader is referenced; its shutdown() releases it, so the writer stops waiting for that rank."""
    q, (r,) = queue_pair(1, max_chunk_bytes=16 * 1024, max_chunks=4)
    host_gpu.send(q, np.ones(20_000, dtype=np.uint8))
    host_gpu.fail_reads = 1
    with pytest.raises(RuntimeError, match="stand-in"):
        r.dequeue(timeout=5)
    r.shutdown()  # r stays referenced
    for _ in range(40):  # ten times what the ring holds
        q.enqueue(b"x" * 8_000, timeout=2)


@pytest.mark.parametrize("copy_fails", [True, False])
def test_a_shutdown_during_a_device_copy_releases_the_chunk_once_the_copy_is_done(queue_pair, host_gpu, copy_fails):
    """shutdown() from another thread while a copy reads the chunk: the chunk is not released under
    the copy (the writer would overwrite what it reads); the copy's end releases it, and the rank
    goes back to the writer whether the copy failed or not."""
    q, (r,) = queue_pair(1, max_chunk_bytes=16 * 1024, max_chunks=4)
    host_gpu.send(q, np.ones(20_000, dtype=np.uint8))
    host_gpu.fail_reads = 1 if copy_fails else 0
    host_gpu.gate = threading.Event()
    raised = []

    def receive():
        try:
            r.dequeue(timeout=5)
        except BaseException as e:
            raised.append(e)
    t = threading.Thread(target=receive)
    t.start()
    assert host_gpu.copying.wait(5)
    r.shutdown()
    with pytest.raises(TimeoutError):  # the chunk under the copy still holds the writer
        for _ in range(40):
            q.enqueue(b"x" * 8_000, timeout=0.2)
    host_gpu.gate.set()
    t.join(10)
    assert len(raised) == 1 and isinstance(raised[0], RuntimeError if copy_fails else ringcast.ClosedError), raised
    for _ in range(40):  # ten times what the ring holds
        q.enqueue(b"x" * 8_000, timeout=2)


def test_a_signal_handler_may_shut_the_reader_down_while_its_copy_holds_the_chunk_lock(queue_pair, host_gpu,
                                                                                      monkeypatch):
    """A handler (SIGTERM's, say) that calls shutdown() runs in the thread that may hold the chunk lock:
    the lock is re-entrant, the held chunk released once, and the copy's own error still raised."""
    import faulthandler
    import signal
    from ringcast import _gpu
    q, (r,) = queue_pair(1, max_chunk_bytes=16 * 1024, max_chunks=4)
    host_gpu.send(q, np.ones(20_000, dtype=np.uint8))
    host_gpu.fail_reads = 1
    claim, fired = _gpu._claim_release, []

    def claim_after_a_signal(queue, reader):  # called with the chunk lock held
        if not fired:
            fired.append(1)
            signal.raise_signal(signal.SIGUSR1)  # its handler runs here, under the lock
        return claim(queue, reader)
    monkeypatch.setattr(_gpu, "_claim_release", claim_after_a_signal)
    previous = signal.signal(signal.SIGUSR1, lambda *_: r.shutdown())
    faulthandler.dump_traceback_later(30, exit=True)  # a deadlock fails the run instead of hanging it
    try:
        with pytest.raises(RuntimeError, match="stand-in"):
            r.dequeue(timeout=5)
    finally:
        faulthandler.cancel_dump_traceback_later()
        signal.signal(signal.SIGUSR1, previous)
    assert fired and not r._reader.holds_raw_chunk
    for _ in range(40):  # ten times what the ring holds: the rank went back
        q.enqueue(b"x" * 8_000, timeout=2)


def test_a_forked_childs_shutdown_leaves_the_parents_held_chunk_alone(queue_pair, host_gpu):
    """A child forked while its parent's reader held a chunk for a retry: the child's shutdown() neither
    raises nor releases it, and the parent's retry still completes the message."""
    q, (r,) = queue_pair(1, max_chunk_bytes=16 * 1024, max_chunks=4)
    source = np.arange(20_000, dtype=np.uint8)
    host_gpu.send(q, source)
    host_gpu.fail_reads = 1
    with pytest.raises(RuntimeError, match="stand-in"):
        r.dequeue(timeout=5)
    pid = os.fork()
    if pid == 0:
        try:
            r.shutdown()
            os._exit(0 if not r._reader.holds_raw_chunk else 2)
        except BaseException:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert r._reader.holds_raw_chunk
    assert (r.dequeue(timeout=5)["a"] == source).all()
