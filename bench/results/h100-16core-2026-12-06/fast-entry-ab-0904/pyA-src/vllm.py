"""ringcast.vllm: a vLLM general plug-in that puts ringcast's MessageQueue in place of vLLM's.

vLLM loads every entry point of the group ``vllm.general_plugins`` in each of its processes (the
engine, the executor, every worker) before it builds executors and workers; ringcast's package
declares ``ringcast = ringcast.vllm:register`` there, so after ``pip install ringcast`` vLLM picks
it up by itself (``VLLM_PLUGINS=ringcast`` loads only this one; a VLLM_PLUGINS without it leaves
vLLM as it is). Without the entry point, call ``ringcast.vllm.install()`` in every process before
vLLM builds its executor. docs/vllm.md.

What ``install()`` replaces: ``MessageQueue`` and ``Handle`` of
``vllm.distributed.device_communicators.shm_broadcast``, in that module and in every loaded module
that imported them by name (``from ...shm_broadcast import Handle, MessageQueue`` binds the class in
the importing module; those bindings are rewritten, aliases included). Modules imported later get
ringcast's from shm_broadcast itself.

The replacement (``ringcast.vllm.MessageQueue``) is ringcast.MessageQueue plus what vLLM calls beyond
it: ``dequeue(timeout, cancel, indefinite)`` and ``acquire_read(timeout, cancel, indefinite)`` with
vLLM's cancel event (and vLLM's later ``(timeout, indefinite)`` without it), vLLM's reading of a
negative timeout and of a reader rank outside both rank lists, ``create_from_process_group`` and
``create_from_process_group_single_reader`` over a torch.distributed ProcessGroup or vLLM's
StatelessProcessGroup, and CPU torch tensors sent out of band (their bytes go straight into the ring,
never through the pickle).

Groups that span machines (multi-node): ranks on the writer's machine read through shared memory,
the others over ZeroMQ (ringcast's remote readers, docs/remote.md), exactly where vLLM's own queue uses
its ZeroMQ socket. The publisher binds to the address vLLM itself would use (vLLM's ``get_ip()``:
``VLLM_HOST_IP`` or the machine's outbound interface), never to every interface: where ``get_ip()``
answers a wildcard address (its fallback on a node without a default route) the queue refuses to start.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import ipaddress
import logging
import os
import pickle
import sys
import threading
import time
from typing import Any, Dict, Iterator, List, Optional, Tuple

from ringcast import _gpu
from ringcast._blocks import end_block
from ringcast._args import _aio_refuse, _check_timeout
from ringcast._core import ClosedError, PeerDeadError
from ringcast._queue import Handle
from ringcast._queue import MessageQueue as _RingcastQueue

SHM_BROADCAST = "vllm.distributed.device_communicators.shm_broadcast"
SWAPPED_NAMES = ("MessageQueue", "Handle")
# A blocked dequeue/acquire_read with a cancel event looks at the event this often (the wait itself
# sleeps in the kernel and wakes at once for a message): vLLM sets it when the executor shuts down.
CANCEL_POLL_S = 0.05

_log = logging.getLogger(__name__)
_lock = threading.Lock()
_originals: Dict[str, Any] = {}  # vLLM's own classes, recorded by the first install()
_swapped: List[Tuple[str, str, Any]] = []  # (module, name, vLLM's class) that install() rewrote


class MessageQueue(_RingcastQueue):
    """ringcast.MessageQueue with vLLM's whole queue interface (see the module docstring).

    Same constructor as ringcast.MessageQueue (vLLM's arguments plus keyword-only options); one
    writer, ``n_local_reader`` reader processes on this machine and ``n_reader - n_local_reader``
    remote ones. As in vLLM, remote readers without ``connect_ip`` get vLLM's host address
    (``host_ip()``).
    """

    def __init__(self, n_reader: int, n_local_reader: int, local_reader_ranks: Optional[List[int]] = None,
                 *args: Any, **kwargs: Any) -> None:
        remote = isinstance(n_reader, int) and isinstance(n_local_reader, int) and n_reader > n_local_reader
        if remote:
            # vLLM's executor passes connect_ip=get_ip() itself, so the address is checked wherever it
            # came from: a wildcard (get_ip()'s fallback) would listen on every interface.
            if len(args) >= 3 and args[2] is not None:
                args = (*args[:2], _specific_address(str(args[2]), "connect_ip"), *args[3:])
            elif kwargs.get("connect_ip") is not None:
                kwargs["connect_ip"] = _specific_address(str(kwargs["connect_ip"]), "connect_ip")
            else:
                kwargs["connect_ip"] = host_ip()
        super().__init__(n_reader, n_local_reader, local_reader_ranks, *args, **kwargs)
        if self._is_writer:
            # enqueue in one binding call, as the base class's: without a GPU array library loaded no
            # tensor can exist and _pickle is pickle.dumps, which the binding calls; with one loaded
            # (torch, always, in vLLM) the binding pickles with _device_pickler_factory's pickler,
            # which sends CPU tensors as _pickle does.
            self._send_object = self._writer.send_object

    @classmethod
    def create_from_handle(cls, handle: Handle, rank: int, *, remote_addr: Optional[str] = None,
                           curve_public_key: Optional[str] = None,
                           curve_secret_key: Optional[str] = None) -> "MessageQueue":
        """Attaches this process as reader ``rank`` (see ringcast.MessageQueue.create_from_handle).

        vLLM's own queue takes any rank outside ``local_reader_ranks`` as a remote reader, and its
        multi-node executor attaches the workers' reply queues with rank -1: a rank in neither
        ``local_reader_ranks`` nor ``remote_reader_ranks``, on a handle with exactly one remote reader
        rank, attaches as that rank.
        """
        queue = _RingcastQueue.create_from_handle(handle, _vllm_reader_rank(handle, rank), remote_addr=remote_addr,
                                                  curve_public_key=curve_public_key, curve_secret_key=curve_secret_key)
        queue.__class__ = cls  # the base builds its own class; the reader state is the same
        return queue  # type: ignore[return-value]

    # ---- vLLM's cancel event --------------------------------------------------------------------
    def dequeue(self, timeout: Optional[float] = None, cancel: Optional[threading.Event] = None,  # type: ignore[override]
                indefinite: bool = False) -> Any:
        """vLLM's dequeue: the next object; ``cancel`` (a threading.Event) set while waiting raises
        RuntimeError('cancelled'), within CANCEL_POLL_S — a message already there is returned all the
        same, as vLLM's queue looks at the event only while it waits. Otherwise as
        ringcast.MessageQueue.dequeue, with vLLM's timeouts: a negative one (a deadline already past,
        as vLLM's executor computes them) takes only what is there, as 0 does. vLLM's later signature,
        ``dequeue(timeout, indefinite)`` without the event, works too, positional arguments included.

        A wait cut into slices loses nothing: a message taken in part stays with the reader for the
        next slice.
        """
        cancel, indefinite = _vllm_cancel_and_indefinite(cancel, indefinite)
        timeout = _vllm_timeout(timeout)
        if cancel is None:
            return super().dequeue(timeout, indefinite)
        self._require_reader("dequeue")
        if self._aio_call is not None:  # as the base's dequeue: not beside a dequeue_async of this reader
            _aio_refuse(self, self._reader, "dequeue")
        if self._gpu_pending is None and self._burst_left:  # what a dequeue_many took and left for the next read
            return self._take_burst_left(1, timeout, None, "dequeue")[0]
        if self._gpu_pending is None:
            parts = self._until_cancelled(self._reader.recv, timeout, cancel, "dequeue")
            if not _gpu.is_device_message(parts):
                return self._loads(parts)
            # CUDA arrays: their chunks follow in the ring. The first slice takes what is there; a
            # slice that times out leaves the message half received (_gpu_pending) for the next.
            try:
                return _gpu.receive(self, parts, 0.0, None)
            except TimeoutError:
                pass
        # A device message a slice (or a timed-out dequeue) left half received: resumed in slices.
        return self._until_cancelled(lambda t: _gpu.resume(self, t), timeout, cancel, "dequeue")

    @contextlib.contextmanager
    def acquire_read(self, timeout: Optional[float] = None, cancel: Optional[threading.Event] = None,  # type: ignore[override]
                     indefinite: bool = False) -> Iterator[memoryview]:
        """vLLM's acquire_read (a zero-copy view of the next acquire_write chunk) with its cancel event:
        set while waiting, RuntimeError('cancelled'); a chunk already there is taken all the same.
        Otherwise as ringcast.MessageQueue.acquire_read, with vLLM's timeouts and signatures (dequeue)."""
        cancel, indefinite = _vllm_cancel_and_indefinite(cancel, indefinite)
        timeout = _vllm_timeout(timeout)
        if cancel is None:
            with super().acquire_read(timeout, indefinite) as view:
                yield view
            return
        self._require_reader("acquire_read")
        if self._aio_call is not None:
            _aio_refuse(self, self._reader, "acquire_read")
        self._refuse_raw_read_while_objects_wait()
        view = self._until_cancelled(self._reader.peek_raw, timeout, cancel, "acquire_read")
        ok = False
        try:
            yield view
            ok = True
        finally:
            try:
                view.release()
            except BufferError:
                pass  # something holds a buffer of `view` itself: release_raw sees the chunk still viewed
            end_block(self._reader.release_raw, ok)  # a view derived from `view` still alive: chunk kept

    def _until_cancelled(self, call: Any, timeout: Optional[float], cancel: threading.Event, what: str) -> Any:
        """`call(seconds)` in slices of CANCEL_POLL_S until it returns, the time is up or `cancel` is set.
        Between two slices no thread is inside the reader, so a dequeue_async may claim it there: each
        slice looks first, as the call's start did (it would take that await's message)."""
        _check_timeout(timeout)  # a bool, a string, a negative or NaN timeout: refused in its own words
        deadline = None if timeout is None else time.monotonic() + max(timeout, 0.0)
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            wait = CANCEL_POLL_S if left is None else max(0.0, min(left, CANCEL_POLL_S))
            if cancel.is_set():
                # Only what is there, as vLLM's queue looks at the event only while it waits; nothing
                # there, or a queue that ended (ringcast's closed or dead peer; vLLM's has neither):
                # cancelled, as before the event was looked at.
                try:
                    return call(0.0)
                except (TimeoutError, ClosedError, PeerDeadError):
                    raise RuntimeError("cancelled") from None
            if self._aio_call is not None:
                _aio_refuse(self, self._reader, what)
            try:
                return call(wait)
            except (TimeoutError, ClosedError, PeerDeadError) as e:
                # The event set during this slice, then the queue shut down or the peer found dead
                # (vLLM's executor on shutdown or a worker's death: shutdown_event.set(), then every
                # queue's shutdown()): cancelled, as when the event was set before the slice.
                if cancel.is_set():
                    raise RuntimeError("cancelled") from None
                if not isinstance(e, TimeoutError):
                    raise
                if left is not None and left <= CANCEL_POLL_S:
                    raise TimeoutError(f"timed out after {timeout} s (waiting with a cancel event)") from None

    # ---- CPU torch tensors out of band ------------------------------------------------------------
    def _pickle(self, obj: Any, buffer_callback: Any) -> bytes:  # type: ignore[override]
        # ringcast.MessageQueue's pickle, with CPU tensors reduced to one PickleBuffer each, which the
        # callback then moves out of band: the same wire format ([pickle, *buffers]) that _loads reads.
        torch = sys.modules.get("torch")
        if torch is None:  # no tensor can exist in a process that never imported torch
            return pickle.dumps(obj, protocol=5, buffer_callback=buffer_callback)
        return _TensorPickler.dumps(obj, buffer_callback, torch, self._oob_threshold)

    def _device_pickler_factory(self) -> Any:
        # enqueue while torch is loaded (always, in vLLM): the GPU path's pickler, CPU tensors out of
        # band as _pickle sends them. Not a bound method: the binding's writer keeps it.
        return functools.partial(_new_tensor_device_pickler, max(1, self._oob_threshold))

    # ---- process groups -------------------------------------------------------------------------
    @classmethod
    def create_from_process_group(cls, pg: Any, max_chunk_bytes: int, max_chunks: int, writer_rank: int = 0,
                                  external_writer_handle: Optional[Handle] = None,
                                  blocking: bool = True) -> "MessageQueue":
        """vLLM's create_from_process_group: group rank ``writer_rank`` writes, every other rank reads.

        A collective: every rank of ``pg`` (a torch.distributed ProcessGroup or vLLM's
        StatelessProcessGroup) calls it. The writer creates the queue (or, given
        ``external_writer_handle``, attaches as a reader of that queue, as vLLM does) and broadcasts
        the handle; the others attach with their group rank. ``blocking``: every rank then calls
        wait_until_ready() (the writer waits until every reader attached).

        Ranks on another machine than the writer's read over ZeroMQ (remote readers: the writer's
        publisher binds to ``host_ip()``); the others through shared memory.

        Raises:
            ValueError: writer_rank is not a group rank. TypeError: pg is neither kind of group.
            ImportError: ranks on another machine, and this ringcast was built without ZeroMQ.
        """
        group = _Group(pg)
        if isinstance(writer_rank, bool) or not isinstance(writer_rank, int) or not 0 <= writer_rank < group.world_size:
            raise ValueError(f"writer_rank {writer_rank!r} is not a rank of the group (0..{group.world_size - 1})")
        same_node = group.same_node_as(writer_rank)  # a collective: every rank takes part
        if group.rank == writer_rank:
            if external_writer_handle is not None:
                queue = cls.create_from_handle(external_writer_handle, group.rank)
            else:
                readers = [r for r in range(group.world_size) if r != writer_rank]
                local = [r for r in readers if same_node[r]]
                remote = [r for r in readers if not same_node[r]]
                queue = cls(len(readers), len(local), local_reader_ranks=local, max_chunk_bytes=max_chunk_bytes,
                            max_chunks=max_chunks, remote_reader_ranks=remote)
            group.broadcast(queue.export_handle(), writer_rank)
        else:
            queue = cls.create_from_handle(group.broadcast(None, writer_rank), group.rank)
        if blocking:
            queue.wait_until_ready()
        return queue

    @classmethod
    def create_from_process_group_single_reader(cls, pg: Any, max_chunk_bytes: int, max_chunks: int,
                                                reader_rank: int = 0,
                                                blocking: bool = False) -> Tuple["MessageQueue", List[Handle]]:
        """vLLM's create_from_process_group_single_reader: every rank writes a queue of its own, read by
        the process of global rank ``reader_rank``.

        A collective over ``pg``. Returns (this rank's queue, the handles of every rank's queue in
        group order on the reader, [] elsewhere); the reader attaches each with
        ``create_from_handle(handle, 0)``. ``blocking``: wait until that reader attached (vLLM's
        default False, since the reader attaches only after this returns).

        A rank on another machine than the reader publishes its queue over ZeroMQ (the reader attaches
        it as a remote reader, rank 0; the publisher binds to that rank's ``host_ip()``).

        Raises:
            ValueError: reader_rank is not in the group. TypeError: pg is neither kind of group.
            ImportError: ranks on another machine, and this ringcast was built without ZeroMQ.
        """
        group = _Group(pg)
        reader_index = group.index_of_global(reader_rank)
        local = group.same_node_as(reader_index)[group.rank]  # a collective: every rank takes part
        queue = cls(1, 1 if local else 0, max_chunk_bytes=max_chunk_bytes, max_chunks=max_chunks,
                    remote_reader_ranks=[] if local else [0])
        handles = group.gather(queue.export_handle(), reader_index)
        if blocking:
            queue.wait_until_ready()
        return queue, handles


# ---- CPU tensors: their bytes as one out-of-band buffer -------------------------------------------
def _vllm_reader_rank(handle: Any, rank: Any) -> Any:
    """The reader rank vLLM means: one in neither rank list, on a handle with exactly one remote
    reader rank, is that rank (vLLM's queue takes every rank outside local_reader_ranks as remote,
    and its multi-node executor attaches with -1). Anything else goes to the base as given."""
    if not isinstance(handle, Handle) or isinstance(rank, bool) or not isinstance(rank, int):
        return rank  # the base refuses it in its own words
    remote = list(vars(handle).get("remote_reader_ranks", []))
    if rank in handle.local_reader_ranks or rank in remote or len(remote) != 1:
        return rank
    return remote[0]


def _vllm_timeout(timeout: Any) -> Any:
    """vLLM's reads take a negative timeout (a deadline already past) as 0: what is there, else
    TimeoutError. NaN, bools and non-numbers go on to be refused."""
    if isinstance(timeout, (int, float)) and not isinstance(timeout, bool) and timeout < 0:
        return 0.0
    return timeout


def _vllm_cancel_and_indefinite(cancel: Any, indefinite: bool) -> Tuple[Optional[threading.Event], bool]:
    """vLLM until late 2025: (timeout, cancel, indefinite); since: (timeout, indefinite), the event
    gone. A bool in the event's place is the later signature's ``indefinite``."""
    if isinstance(cancel, bool):
        return None, cancel
    return cancel, indefinite


def _rebuild_cpu_tensor(data: Any, dtype: Any, shape: Tuple[int, ...]) -> Any:
    import torch

    if isinstance(data, bytes):  # kept in band (the part limit was reached): torch wants it writable
        data = bytearray(data)
    return torch.frombuffer(data, dtype=torch.uint8).view(dtype).reshape(shape)


def _reduce_cpu_tensor(obj: Any, torch: Any, threshold: int) -> Any:
    """A plain CPU tensor of at least `threshold` bytes as its dtype, shape and one PickleBuffer of its
    bytes (the buffer callback then moves them out of band, as for a numpy array); else NotImplemented."""
    if (type(obj) is torch.Tensor and obj.device.type == "cpu" and obj.layout is torch.strided
            and not obj.requires_grad and not obj.is_quantized and obj.numel() * obj.element_size() >= threshold):
        flat = obj.detach().resolve_conj().resolve_neg().contiguous().reshape(-1)
        return _rebuild_cpu_tensor, (pickle.PickleBuffer(flat.view(torch.uint8).numpy()), obj.dtype,
                                     tuple(obj.shape))
    return NotImplemented


class _TensorDevicePickler(_gpu._DevicePickler):
    """The GPU path's pickler (device arrays become references) with CPU tensors as _TensorPickler
    sends them, once torch is loaded: the binding keeps one pickler per writer, so torch is looked up
    per object, not when the pickler was made (cupy loaded before torch). Its threshold is set by
    _new_tensor_device_pickler."""

    threshold = 1

    def reducer_override(self, obj: Any) -> Any:
        reduced = super().reducer_override(obj)
        if reduced is not NotImplemented:
            return reduced
        torch = sys.modules.get("torch")
        return NotImplemented if torch is None else _reduce_cpu_tensor(obj, torch, self.threshold)


def _new_tensor_device_pickler(threshold: int, file: Any, protocol: int = 5, buffer_callback: Any = None) -> Any:
    """MessageQueue._device_pickler_factory's pickler: the device pickler that also sends CPU tensors
    out of band."""
    pickler = _TensorDevicePickler(file, protocol=protocol, buffer_callback=buffer_callback)
    pickler.threshold = threshold
    return pickler


class _TensorPickler(pickle.Pickler):
    """A protocol-5 pickler that sends a plain CPU tensor as its dtype, shape and one PickleBuffer of its
    bytes: the buffer callback then moves the bytes out of band, as for a numpy array."""

    torch: Any = None
    threshold = 0

    def reducer_override(self, obj: Any) -> Any:
        return _reduce_cpu_tensor(obj, self.torch, self.threshold)

    @classmethod
    def dumps(cls, obj: Any, buffer_callback: Any, torch: Any, threshold: int) -> bytes:
        import io

        out = io.BytesIO()
        pickler = cls(out, protocol=5, buffer_callback=buffer_callback)
        pickler.torch = torch
        pickler.threshold = max(1, threshold)
        pickler.dump(obj)
        return out.getvalue()


# ---- process groups: torch.distributed or vLLM's StatelessProcessGroup ---------------------------
def _node_key() -> Tuple[str, int]:
    """Which machine, as shared memory sees it: the kernel's boot id and the /dev/shm file system."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
    except OSError:
        boot = os.uname().nodename
    return boot, os.stat("/dev/shm").st_dev


class _Group:
    """The few collectives the constructors need, over either kind of process group."""

    def __init__(self, pg: Any) -> None:
        dist = _torch_distributed()
        self.pg = pg
        self.torch = dist is not None and isinstance(pg, dist.ProcessGroup)
        if self.torch:
            self.dist = dist
            self.rank = dist.get_rank(pg)
            self.world_size = dist.get_world_size(pg)
            self.global_ranks = list(dist.get_process_group_ranks(pg))
        elif hasattr(pg, "broadcast_obj") and hasattr(pg, "all_gather_obj"):  # vLLM's StatelessProcessGroup
            self.rank = pg.rank
            self.world_size = pg.world_size
            self.global_ranks = list(range(pg.world_size))
        else:
            raise TypeError(f"expected a torch.distributed ProcessGroup or vLLM's StatelessProcessGroup, "
                            f"got {type(pg).__name__}")

    def index_of_global(self, global_rank: int) -> int:
        if global_rank not in self.global_ranks:
            raise ValueError(f"rank {global_rank} is not in the process group (ranks {self.global_ranks})")
        return self.global_ranks.index(global_rank)

    def all_gather(self, obj: Any) -> List[Any]:
        if self.torch:
            out: List[Any] = [None] * self.world_size
            self.dist.all_gather_object(out, obj, group=self.pg)
            return out
        return list(self.pg.all_gather_obj(obj))

    def broadcast(self, obj: Any, src: int) -> Any:
        if self.torch:
            box = [obj]
            self.dist.broadcast_object_list(box, src=self.global_ranks[src], group=self.pg)
            return box[0]
        return self.pg.broadcast_obj(obj, src)

    def gather(self, obj: Any, dst: int) -> List[Any]:
        if self.torch:
            out: Optional[List[Any]] = [None] * self.world_size if self.rank == dst else None
            self.dist.gather_object(obj, out, dst=self.global_ranks[dst], group=self.pg)
            return out or []
        everything = self.all_gather(obj)
        return everything if self.rank == dst else []

    def same_node_as(self, center: int) -> List[bool]:
        """For each group rank: whether it runs on the machine of group rank ``center`` (a collective;
        vLLM's in_the_same_node_as)."""
        keys = self.all_gather(_node_key())
        return [k == keys[center] for k in keys]


def host_ip() -> str:
    """The address a publisher for remote readers binds to, as vLLM's own queue chooses it: vLLM's
    ``get_ip()`` (``VLLM_HOST_IP``, else the interface of the machine's outbound route), or
    ``VLLM_HOST_IP`` where vLLM is not importable.

    Raises:
        ValueError: neither is available, or the answer is a wildcard address.
    """
    for module_name in ("vllm.utils.network_utils", "vllm.utils"):
        try:
            get_ip = getattr(importlib.import_module(module_name), "get_ip", None)
        except ImportError:
            continue
        if callable(get_ip):
            return _specific_address(str(get_ip()), "vLLM's get_ip()")
    ip = os.environ.get("VLLM_HOST_IP", "")
    if not ip:
        raise ValueError("ringcast.vllm: readers on another machine need the address to publish on: set "
                         "VLLM_HOST_IP (vLLM's get_ip() is not importable here)")
    return _specific_address(ip, "VLLM_HOST_IP")


def _specific_address(ip: str, source: str) -> str:
    # vLLM's get_ip() falls back to "0.0.0.0" (with only a warning) on a node without a default route
    # and without VLLM_HOST_IP/HOST_IP. Publishing there would bind every interface, which the caller
    # never asked for, and hand remote readers tcp://0.0.0.0:PORT, which no other machine can reach.
    stripped = ip.strip().strip("[]")
    remedy = ("set VLLM_HOST_IP to this machine's address on the readers' network (vLLM's get_ip() answers "
              "it), or pass connect_ip")
    try:
        unspecified = not stripped or ipaddress.ip_address(stripped).is_unspecified
    except ValueError:  # a host name: the publisher listens on one interface, named by its address
        raise ValueError(f"ringcast.vllm: {source} gave {ip!r}, not a literal IPv4/IPv6 address: the publisher "
                         f"listens on the one interface an address names; {remedy}") from None
    if unspecified:
        raise ValueError(f"ringcast.vllm: {source} gave {ip!r}, a wildcard address: readers on another machine "
                         f"cannot reach it and the publisher would listen on every interface; {remedy}")
    return ip


def _torch_distributed() -> Any:
    if "torch" not in sys.modules:
        return None  # no torch ProcessGroup can exist in a process that never imported torch
    try:
        import torch.distributed as dist
    except ImportError:
        return None
    return dist if dist.is_available() else None


# ---- the swap -------------------------------------------------------------------------------------
def install() -> List[str]:
    """Puts ringcast's MessageQueue and Handle in place of vLLM's shm_broadcast ones.

    In shm_broadcast itself and in every loaded module that holds vLLM's classes under any name.
    Idempotent; safe in every process (vLLM loads plug-ins in each). Call it before vLLM creates its
    queues: a queue already made stays vLLM's.

    Returns:
        The ``module.name`` bindings rewritten by this call (empty when nothing was left to swap).

    Raises:
        ImportError: vLLM (its shm_broadcast module) is not importable.
    """
    replacements = {"MessageQueue": MessageQueue, "Handle": Handle}
    with _lock:
        shm = importlib.import_module(SHM_BROADCAST)
        for name in SWAPPED_NAMES:
            current = getattr(shm, name)
            if name not in _originals and current is not replacements[name]:
                _originals[name] = current
        by_id = {id(_originals[n]): replacements[n] for n in _originals}
        changed = []
        for module_name, module in list(sys.modules.items()):
            namespace = getattr(module, "__dict__", None)
            if not isinstance(namespace, dict):
                continue
            for attr, value in list(namespace.items()):
                new = by_id.get(id(value))
                if new is not None and value is not new:
                    namespace[attr] = new
                    _swapped.append((module_name, attr, value))
                    changed.append(f"{module_name}.{attr}")
        return sorted(changed)


def uninstall() -> List[str]:
    """Puts vLLM's own classes back in the bindings install() rewrote (those still holding ringcast's);
    returns them."""
    with _lock:
        changed = []
        for module_name, attr, original in _swapped:
            namespace = getattr(sys.modules.get(module_name), "__dict__", None)
            if isinstance(namespace, dict) and namespace.get(attr) in (MessageQueue, Handle):
                namespace[attr] = original
                changed.append(f"{module_name}.{attr}")
        _swapped.clear()
        _originals.clear()
        return sorted(changed)


def installed() -> bool:
    """Whether shm_broadcast's MessageQueue is ringcast's in this process."""
    shm = sys.modules.get(SHM_BROADCAST)
    return shm is not None and getattr(shm, "MessageQueue", None) is MessageQueue


def register() -> None:
    """The ``vllm.general_plugins`` entry point: install(), logged (INFO, logger ringcast.vllm)."""
    changed = install()
    if changed:
        _log.info("pid %d: vLLM's shm_broadcast MessageQueue/Handle replaced by ringcast's: %s", os.getpid(),
                  ", ".join(changed))
