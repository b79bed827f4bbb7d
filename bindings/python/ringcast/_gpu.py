"""The GPU path of MessageQueue: device arrays travel by DMA, the rest of the object by pickle.

``MessageQueue.enqueue(obj)`` of an object holding CUDA arrays (torch tensors, cupy arrays, anything
with ``__cuda_array_interface__`` or a CUDA ``__dlpack__``) sends:

1. one ordinary message: ``[_MAGIC, pickle(array metadata), pickle(obj with each array replaced by a
   reference to its index), *out-of-band buffers]``;
2. then each array's bytes as raw ring chunks, each one DMA from device memory straight into the
   registered ring (``ringcast._gpucore``), committed only after that copy completed.

The reader, on seeing the magic, allocates each array on its device (``dequeue(device=...)``), copies
every chunk ring -> device (released only after that copy completed) and unpickles the object with
the new arrays in place. Nothing here imports torch, cupy or the GPU runtime at module import: the
writer checks for device arrays only while a GPU array library is already loaded (``sys.modules``),
and ``ringcast._gpucore`` is imported on the first device message.

Streams: the writer copies an array on the stream its producer works on (torch: the current stream of
the tensor's device; CUDA array interface: its ``stream`` entry; DLPack: the legacy default stream,
which the producer synchronizes to), so the copy follows the kernels that wrote it, and enqueue
returns only once the bytes are in the ring. The reader copies on the current stream of its device
and returns only once the copy completed: the arrays it returns are ready on every stream.
"""

from __future__ import annotations

import ctypes
import io
import os
import pickle
import sys
import threading
import time
from typing import Any, List, Optional, Sequence

from ringcast._blocks import end_block
from ringcast._core import ClosedError, RingcastError, SegmentError

_MAGIC = b"RCGPU\x01"  # parts[0] of a device message; an ordinary one starts with a pickle (b"\x80")
_gpucore = None


def _core():
    global _gpucore
    if _gpucore is None:
        try:
            from ringcast import _gpucore as module
        except ImportError as e:
            raise RuntimeError("this ringcast was built without GPU interop (configure with RINGCAST_CUDA=ON "
                               "and a CUDA toolkit): device arrays cannot be sent or received") from e
        _gpucore = module
    return _gpucore


def probe(device: int = 0) -> dict:
    """The GPU capabilities ringcast sees (a dict; ``usable`` False with ``reason`` and ``why_not``
    naming the runtime error when there is no driver or no device). Raises RuntimeError when this
    ringcast was built without GPU interop."""
    return _core().probe(device)


# The libraries with device arrays ringcast moves (DLPack / CUDA array interface): while one of them is
# loaded, enqueue looks for device arrays (the binding's Writer.send_object is given this tuple).
DEVICE_ARRAY_LIBRARIES = ("torch", "cupy", "numba", "jax")


def may_hold_device_arrays() -> bool:
    """True once a GPU array library is loaded: only then does enqueue look for device arrays."""
    # DEVICE_ARRAY_LIBRARIES spelled out: a generator over the tuple costs more than the four lookups.
    modules = sys.modules
    return "torch" in modules or "cupy" in modules or "numba" in modules or "jax" in modules


def is_device_message(parts: list) -> bool:
    return len(parts) >= 3 and parts[0] == _MAGIC


# ---- the writer ------------------------------------------------------------------------------------
class _Array:
    """One device array being sent: where its bytes are, and how the reader rebuilds it."""

    __slots__ = ("meta", "ptr", "nbytes", "stream", "device", "keep", "release")

    def __init__(self, meta, ptr, nbytes, stream, device, keep, release=None):
        self.meta, self.ptr, self.nbytes, self.stream, self.device = meta, ptr, nbytes, stream, device
        self.keep, self.release = keep, release


def _typestr_itemsize(typestr: str) -> int:
    return int(typestr[2:])


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int), ("dtype", _DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    pass


_DLManagedTensor._fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                             ("deleter", ctypes.CFUNCTYPE(None, ctypes.POINTER(_DLManagedTensor)))]
_DL_CUDA, _DL_CUDA_MANAGED = 2, 13
_DL_KINDS = {0: "i", 1: "u", 2: "f", 6: "b"}  # DLPack type codes -> array-interface kinds (bool: 6)


def _from_dlpack(obj) -> Optional[_Array]:
    device_type, device_id = obj.__dlpack_device__()
    if device_type not in (_DL_CUDA, _DL_CUDA_MANAGED):
        return None
    capsule = obj.__dlpack__(stream=1)  # the producer makes the data ready on the legacy default stream
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    managed = ctypes.cast(get(capsule, b"dltensor"), ctypes.POINTER(_DLManagedTensor))
    rename = ctypes.pythonapi.PyCapsule_SetName
    rename.restype, rename.argtypes = ctypes.c_int, [ctypes.py_object, ctypes.c_char_p]
    rename(capsule, b"used_dltensor")  # consumed: the capsule no longer frees it, we call the deleter
    t = managed.contents.dl_tensor
    shape = tuple(t.shape[i] for i in range(t.ndim))
    itemsize = t.dtype.bits // 8 * t.dtype.lanes
    if t.strides:  # contiguous (row-major) only
        expected = itemsize
        for i in reversed(range(t.ndim)):
            if shape[i] != 1 and t.strides[i] * itemsize != expected:
                managed.contents.deleter(managed)
                raise ValueError("ringcast sends contiguous device arrays only (DLPack strides are not row-major)")
            expected *= shape[i]
    nbytes = itemsize
    for d in shape:
        nbytes *= d
    typestr = "<" + _DL_KINDS.get(t.dtype.code, "V") + str(itemsize)

    def release(m=managed):
        if m.contents.deleter:
            m.contents.deleter(m)

    meta = ("array", shape, typestr, None, nbytes)
    return _Array(meta, (t.data or 0) + t.byte_offset, nbytes, 1, device_id, obj, release)


def _device_kind(obj) -> Optional[str]:
    """Which kind of device array ``obj`` is ("torch", "cai", "dlpack"), or None: _describe's test
    without its work (no copy, no capsule)."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.Tensor):
        return "torch" if obj.is_cuda else None
    # The protocols are looked up on the type, as C looks up dunders: an object whose __getattr__
    # answers every name (an attribute-dict config, a mock) is no device array, and asking the
    # instance would take its answer for one (a {} without "shape", a __dlpack_device__ that is not
    # a method). The interface itself is the instance's (a property of its type), and must be one.
    cls = type(obj)
    if hasattr(cls, "__cuda_array_interface__"):
        cai = getattr(obj, "__cuda_array_interface__", None)
        if isinstance(cai, dict) and all(key in cai for key in ("shape", "typestr", "data")):
            return "cai"
    if hasattr(cls, "__dlpack_device__") and hasattr(cls, "__dlpack__"):
        return "dlpack" if obj.__dlpack_device__()[0] in (_DL_CUDA, _DL_CUDA_MANAGED) else None
    return None


def _describe(obj) -> Optional[_Array]:
    """The device array inside ``obj``, or None for anything else."""
    kind = _device_kind(obj)
    if kind == "torch":
        t = obj.detach()
        if not t.is_contiguous():
            t = t.contiguous()  # a device-side copy; the original is untouched
        nbytes = t.numel() * t.element_size()
        meta = ("torch", tuple(t.shape), str(t.dtype).replace("torch.", ""), obj.requires_grad, nbytes)
        return _Array(meta, t.data_ptr(), nbytes,
                      sys.modules["torch"].cuda.current_stream(t.device).cuda_stream, t.device.index, t)
    if kind == "cai":
        cai = obj.__cuda_array_interface__
        shape = tuple(cai["shape"])
        typestr = cai["typestr"]
        itemsize = _typestr_itemsize(typestr)
        strides = cai.get("strides")
        if strides is not None:
            expected = itemsize
            for dim, stride in zip(reversed(shape), reversed(strides)):
                if dim != 1 and stride != expected:
                    raise ValueError("ringcast sends contiguous device arrays only (make it contiguous first)")
                expected *= dim
        nbytes = itemsize
        for d in shape:
            nbytes *= d
        library = "cupy" if type(obj).__module__.startswith("cupy") else "array"
        stream = cai.get("stream") or 0  # None: nothing to wait for; 1 / 2: the default streams
        return _Array((library, shape, typestr, None, nbytes), cai["data"][0], nbytes, stream, _device_of_pointer(obj), obj)
    if kind == "dlpack":
        return _from_dlpack(obj)
    return None


def _device_of_pointer(obj) -> int:
    device = getattr(obj, "device", None)
    return int(getattr(device, "id", getattr(device, "index", 0)) or 0)


class _DevicePickler(pickle.Pickler):
    """Protocol 5 with out-of-band buffers, and each device array replaced by a reference to its place
    in the message's array list: ``_device_array(index)``, which the reader's _DeviceUnpickler resolves
    to the array it rebuilt. The C pickler calls reducer_override only for objects that are not of a
    plain type (None, bool, int, float, str, bytes, bytearray, list, tuple, dict, set, frozenset,
    PickleBuffer) and not already pickled in this message, so a message of plain data makes no Python
    call per object: with torch loaded, a persistent_id hook (called for every object) made an enqueue
    of a step's ~1.8 KB request 2.8-3.7x as long as this (docs/gpu.md). One pass: a __reduce__ with
    side effects runs once, device arrays or not."""

    # Made as pickle.Pickler(file, protocol=5, buffer_callback=...), with no __init__ of its own: the
    # binding makes one per writer while a GPU array library is loaded (Writer.send_object) and
    # reuses it after small messages, and a Python __init__ would cost a frame whenever it makes one.
    # The class's empty tuple stands for "none found"; the first array found makes the instance's list.
    arrays: Sequence[_Array] = ()

    def reducer_override(self, obj):
        # A class is never a device array (and numpy.ndarray's unbound __dlpack_device__ cannot be called).
        if isinstance(obj, type):
            return NotImplemented
        array = _describe(obj)
        if array is None:
            return NotImplemented
        self.arrays = [*self.arrays, array]  # a message holds a few arrays: the copy costs nothing
        return (_device_array, (len(self.arrays) - 1,))  # memoized: the same array twice is sent once

    def abandon(self) -> None:
        """The dump raised: gives back what describing the arrays found so far took (the binding
        calls it; so does enqueue's Python path)."""
        arrays, self.arrays = self.arrays, ()
        _release(list(arrays))


def _device_array(index: int) -> Any:
    """The reference a device message's pickle holds for its array ``index``; only ringcast's reader
    resolves it (_DeviceUnpickler.find_class)."""
    raise RingcastError(f"device array {index} of a ringcast device message unpickled without ringcast's "
                        "reader (MessageQueue.dequeue)")


def _registration(queue, endpoint, address: int, device: int):
    reg = queue.__dict__.get("_gpu_registration")
    if reg is None:
        # keepalive: the registration is destroyed (unregistered) before the endpoint's mapping.
        reg = _core().Registration(address, device, endpoint)
        queue.__dict__["_gpu_registration"] = reg
    return reg


def _remaining(deadline: Optional[float]) -> Optional[float]:
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def enqueue(queue, obj: Any, timeout: Optional[float]) -> None:
    """MessageQueue.enqueue while a GPU array library is loaded, for a queue whose pickling stays in
    Python (a subclass with a _pickle of its own): one pickling pass with the queue's device pickler,
    which finds the device arrays; an object without any goes as the ordinary message. Every other
    queue does the same in one binding call (Writer.send_object) and comes here only with arrays
    found (send_device_message)."""
    from ringcast._pickling import dumps_out_of_band

    picklers: List[_DevicePickler] = []

    def device_pickle(o: Any, callback: Any) -> bytes:
        out = io.BytesIO()
        picklers.append(queue._device_pickler_factory()(out, protocol=5, buffer_callback=callback))
        picklers[0].dump(o)
        return out.getvalue()

    # Two parts fewer than the plain path: a device message is [_MAGIC, metas, pickle, *buffers].
    try:
        data, *oob = dumps_out_of_band(obj, queue._oob_threshold, queue._max_parts - 3, device_pickle)
    except BaseException:
        abandon = getattr(picklers[0], "abandon", None) if picklers else None
        if abandon is not None:
            abandon()  # arrays described before the pickling failed
        raise
    if not getattr(picklers[0], "arrays", ()):
        queue._writer.send([data, *oob], timeout)
        return
    send_device_message(queue, data, oob, picklers[0], timeout)


def send_device_message(queue, data: bytes, oob: list, pickler: _DevicePickler, timeout: Optional[float]) -> None:
    """Sends a message whose pickling found device arrays (``pickler.arrays``): the message, then each
    array's bytes by DMA into the ring. Gives back what describing the arrays took, sent or not."""
    arrays = list(pickler.arrays)
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        metas = pickle.dumps([a.meta for a in arrays], protocol=5)
        queue._writer.send([_MAGIC, metas, data, *oob], timeout)
        writer = queue._writer
        chunk = writer.max_reserve
        for a in arrays:
            sent = 0
            while sent < a.nbytes:
                n = min(chunk, a.nbytes - sent)
                view = writer.reserve_raw(n, _remaining(deadline))
                published = False
                try:
                    address = _core().buffer_address(view)
                    reg = _registration(queue, writer, address, a.device or 0)
                    reg.copy(address, a.ptr + sent, n, True, a.stream)  # returns once the bytes landed
                    published = True
                finally:
                    view.release()
                    end_block(lambda: writer.commit_raw(None, published), published)
                sent += n
    finally:
        _release(arrays)


def _release(arrays: List[_Array]) -> None:
    """Gives back what describing each array took (a DLPack capsule's tensor)."""
    for a in arrays:
        if a.release is not None:
            a.release()


# ---- the reader ------------------------------------------------------------------------------------
_TYPESTR_TO_TORCH = {"<f2": "float16", "<f4": "float32", "<f8": "float64", "|i1": "int8", "<i2": "int16",
                     "<i4": "int32", "<i8": "int64", "|u1": "uint8", "|b1": "bool", "<u2": "uint16",
                     "<u4": "uint32", "<u8": "uint64", "<b1": "bool", "<i1": "int8", "<u1": "uint8"}


def _device_index(device) -> int:
    if device is None:
        torch = sys.modules.get("torch")
        return torch.cuda.current_device() if torch is not None and torch.cuda.is_available() else 0
    if isinstance(device, int):
        return device
    if isinstance(device, str):
        return int(device.split(":")[1]) if ":" in device else 0
    return int(getattr(device, "index", None) or 0)  # torch.device


def _allocate(meta, device: int):
    """(array, device pointer, stream) of a fresh destination on `device`."""
    kind, shape, dtype, requires_grad, _ = meta
    if kind == "cupy" or (kind == "array" and "torch" not in sys.modules and _importable("cupy")):
        import cupy  # optional: only when the sender used cupy
        with cupy.cuda.Device(device):
            a = cupy.empty(shape, dtype=dtype)
            return a, a.data.ptr, cupy.cuda.get_current_stream().ptr
    import torch  # the sender used torch (or a generic array): rebuilt as a torch tensor
    name = dtype if kind == "torch" else _TYPESTR_TO_TORCH.get(dtype)
    if name is None:
        raise RingcastError(f"cannot rebuild a device array of type {dtype!r} as a torch tensor")
    t = torch.empty(shape, dtype=getattr(torch, name), device=f"cuda:{device}")
    if requires_grad:
        t.requires_grad_(True)
    return t, t.data_ptr(), torch.cuda.current_stream(t.device).cuda_stream


def _importable(name: str) -> bool:
    import importlib.util
    return importlib.util.find_spec(name) is not None


class _DeviceUnpickler(pickle.Unpickler):
    def __init__(self, file, buffers, arrays):
        super().__init__(file, buffers=buffers)
        self.arrays = arrays

    def find_class(self, module, name):
        if module == __name__ and name == "_device_array":
            return self.arrays.__getitem__  # the writer's _device_array(index): the array rebuilt here
        return super().find_class(module, name)


# A chunk's copy ring -> device reads the ring through a view of its bytes; the chunk is released (the
# writer may reuse its bytes) only once no copy can read them any more. A copy that raises keeps its
# chunk peeked (the reader's holds_raw_chunk), so that the next dequeue retries it. A reader shut down
# after that has no next dequeue: its shutdown releases the held chunk, so that its rank is not kept
# from the writer (a reader's claim ends at its release) until the queue is garbage-collected.
#
# shutdown() may run in another thread while a copy is between its peek and its release (the DMA runs
# without the GIL), or in a signal handler of the copying thread itself. The chunk lock orders the two:
# re-entrant, as a handler runs in the thread that may hold it; held for a few dict operations only,
# never across a wait, a copy or the release itself (a remote reader's goodbye lingers up to 0.5 s):
#   copy      under the lock: in_copy = True
#             peek, copy, release without it — the view is live only here
#             under the lock: in_copy = False; claim the release if shut, a chunk is still held and
#             no one claimed it yet; then, outside the lock, release if claimed
#   shutdown  the reader shut first (every later peek raises ClosedError); then under the lock:
#             shut = True; claim the release if no copy is in progress, a chunk is held and no one
#             claimed it; then, outside the lock, release if claimed
# So a held chunk is released by whichever of the two comes second, once (the claim), and never while
# a copy may read it: a copy in progress at shutdown's check releases it itself as it leaves, and one
# that starts after finds the reader shut (its peek raises; a chunk held from before is released by
# that copy's own leaving). A forked child holds no chunk of its own (holds_raw_chunk is False there)
# and never waits for a lock a parent's thread held at the fork (_chunk_lock).


def _chunk_lock(queue):
    entry = queue.__dict__.get("_gpu_chunk_lock")
    if entry is None:
        entry = queue.__dict__.setdefault("_gpu_chunk_lock", (os.getpid(), threading.RLock()))  # one, atomically
    # A forked child: the parent's lock may be held by a thread that does not exist here. The child's
    # endpoint refuses every call (peek_raw, release_raw), so no copy of its own needs ordering.
    return entry[1] if entry[0] == os.getpid() else threading.RLock()


def _claim_release(queue, reader) -> bool:
    """Under the chunk lock: whether this caller releases the held chunk (at most one ever does)."""
    if not queue.__dict__.get("_gpu_shut") or queue.__dict__.get("_gpu_in_copy"):
        return False
    if queue.__dict__.get("_gpu_release_claimed") or not reader.holds_raw_chunk:
        return False
    queue.__dict__["_gpu_release_claimed"] = True
    return True


def _release_after_shutdown(reader) -> None:
    try:
        reader.release_raw()  # after the reader's shutdown this gives its rank back, then says it is shut
    except ClosedError:
        pass


def release_held_chunk(queue) -> None:
    """MessageQueue.shutdown() of a reader, after the reader's own shutdown: gives back the chunk a
    failed copy kept for a retry that will never come (see the chunk lock above)."""
    with _chunk_lock(queue):
        queue.__dict__["_gpu_shut"] = True
        claimed = _claim_release(queue, queue._reader)
    if claimed:
        _release_after_shutdown(queue._reader)


def receive(queue, parts: list, timeout: Optional[float], device) -> Any:
    """The reader half: the arrays' chunks ring -> device, then the object around them."""
    metas = pickle.loads(parts[1])
    state = {"metas": metas, "payload": parts[2], "oob": parts[3:], "arrays": [], "index": 0, "received": 0,
             "device": _device_index(device)}
    queue.__dict__["_gpu_pending"] = state
    return resume(queue, timeout)


def _copy_one_chunk(queue, state: dict, dst: int, room: int, stream: int, deadline: Optional[float]) -> int:
    """Copies the next chunk ring -> device at `dst` (at most `room` bytes) and releases it; returns
    its size. The chunk lock's protocol (above) around the peek, the copy and the release."""
    reader, lock = queue._reader, _chunk_lock(queue)
    try:
        with lock:
            queue.__dict__["_gpu_in_copy"] = True
        try:
            view = reader.peek_raw(_remaining(deadline))
        except RingcastError as e:
            if "the next message was sent with enqueue()" not in str(e):
                raise
            queue.__dict__["_gpu_pending"] = None  # the next message is an ordinary one: left for later
            raise RingcastError("a device message was withdrawn by its writer before all its arrays "
                                "arrived (its enqueue failed part-way); the next dequeue returns the "
                                "message after it") from None
        try:
            n = view.nbytes
            if n > room:
                raise SegmentError(f"device message corrupt: a chunk of {n} bytes overruns its array "
                                   f"({room} bytes left)")
            address = _core().buffer_address(view)
            reg = _registration(queue, reader, address, state["device"])
            reg.copy(dst, address, n, False, stream)  # returns once it completed
        finally:
            view.release()
        reader.release_raw()  # only now may the writer reuse the chunk: the DMA has read it
        return n
    finally:
        with lock:
            queue.__dict__["_gpu_in_copy"] = False
            claimed = _claim_release(queue, reader)  # shut down meanwhile: no retry will come
        if claimed:
            _release_after_shutdown(reader)


def resume(queue, timeout: Optional[float]) -> Any:
    """Continues a device message a timed-out dequeue left half received."""
    state = queue.__dict__["_gpu_pending"]
    deadline = None if timeout is None else time.monotonic() + timeout
    metas, arrays = state["metas"], state["arrays"]
    while state["index"] < len(metas):
        meta = metas[state["index"]]
        if len(arrays) == state["index"]:
            arrays.append(_allocate(meta, state["device"]))
        array, ptr, stream = arrays[state["index"]]
        nbytes = meta[4]
        while state["received"] < nbytes:
            n = _copy_one_chunk(queue, state, ptr + state["received"], nbytes - state["received"], stream, deadline)
            state["received"] += n
        state["index"] += 1
        state["received"] = 0
    queue.__dict__["_gpu_pending"] = None
    objects = [a[0] for a in arrays]
    return _DeviceUnpickler(io.BytesIO(state["payload"]), state["oob"], objects).load()

