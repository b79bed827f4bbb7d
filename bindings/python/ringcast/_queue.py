"""MessageQueue: vLLM's shm_broadcast API on top of ringcast._core.

Ownership of received objects: every object dequeue() returns owns its memory (the reader copies each
part straight from the ring into a fresh bytes/bytearray before the ring space is released), so it
stays valid forever and is independent of the queue. acquire_read() is the zero-copy exception: its
memoryview is valid only inside the with-block.
"""

from __future__ import annotations

import os
import pickle
import uuid
import weakref
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator, List, Optional

from ringcast import _core
from ringcast._core import RingcastError

# Buffers (numpy arrays, pickle.PickleBuffer, a top-level bytes/bytearray/memoryview) of at least this
# many bytes travel out-of-band: copied from the object straight into the ring, and from the ring
# straight into the buffer the receiver's object is rebuilt on. Smaller ones stay inside the pickle.
OOB_THRESHOLD = 4096

_VLLM_MAX_CHUNK_BYTES = 1024 * 1024 * 10  # vLLM's defaults
_VLLM_MAX_CHUNKS = 10
_REMOTE_READERS_ISSUE = "remote readers (ZeroMQ) issue"


@dataclass
class Handle:
    """Everything a reader process needs to attach; picklable (send it to spawned workers)."""

    name: str
    n_reader: int
    local_reader_ranks: List[int]
    max_chunk_bytes: int
    max_chunks: int
    creation_time_ns: int  # tells a stale handle from a re-created segment of the same name
    writer_pid: int
    wait: str = "hybrid"
    spin_us: float = 10.0  # hybrid: how long a waiter spins before sleeping in the kernel
    spin_max_us: float = 0.0  # hybrid: > spin_us makes the spin adaptive, up to this long
    liveness_interval: float = 1.0
    # vLLM Handle fields, kept for code that inspects them; remote readers are not supported yet.
    local_subscribe_addr: Optional[str] = None
    remote_subscribe_addr: Optional[str] = None
    remote_addr_ipv6: bool = False
    # The ringcast ABI the exporting process spoke; -1 in a handle built by hand (set by export).
    abi_version: int = -1

    @property
    def buffer_handle(self):
        return (self.n_reader, self.max_chunk_bytes, self.max_chunks, self.name)


def check_handle_version(handle) -> None:
    """A handle pickled by another ringcast version (its fields may mean other things) is refused with
    the reason, before anything is attached. Looks at the instance's own fields: a pickle from a
    version without the field must not pick up the class default."""
    version = vars(handle).get("abi_version")
    if version != _core.ABI_VERSION:
        raise ValueError(f"handle from another ringcast version (ABI {version if version is not None else 'unknown'}); "
                         f"this ringcast speaks ABI {_core.ABI_VERSION}: export a new handle from the writer")


def _check_int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


def _capacity_for(max_chunk_bytes: int, max_chunks: int) -> int:
    # max_chunk_bytes * max_chunks sizes the ring as in vLLM; the ring's largest record is a quarter of
    # it, and acquire_write() must be able to hand out max_chunk_bytes in one record.
    need = max(max_chunk_bytes * max_chunks, 4 * (max_chunk_bytes + 16), _core.MIN_CAPACITY)
    return 1 << (need - 1).bit_length()


def _shutdown_writer(core_writer) -> None:  # weakref.finalize callback: must not reference the queue
    core_writer.shutdown()


class MessageQueue:
    """One writer -> n_local_reader reader processes; every reader gets every message, in order.

    Same constructor and methods as vLLM's MessageQueue. Extra keyword-only options: ``name`` (the
    /dev/shm name), ``wait`` ('hybrid', 'futex', 'spin', 'spin_yield'), ``spin_us`` (hybrid: spin this
    long before sleeping; applies to the readers too), ``spin_max_us`` (hybrid: above spin_us, the spin
    adapts: each endpoint spins about twice as long as its recent waits lasted, up to spin_max_us, and
    only spin_us once its waits have been longer than that; past spin_us the spin yields the CPU and
    stops when another thread needed it — low latency while steps come quickly, no CPU once idle),
    ``liveness_interval`` (seconds between dead-peer checks while blocked), ``oob_threshold``.
    """

    def __init__(
        self,
        n_reader: int,
        n_local_reader: int,
        local_reader_ranks: Optional[List[int]] = None,
        max_chunk_bytes: int = _VLLM_MAX_CHUNK_BYTES,
        max_chunks: int = _VLLM_MAX_CHUNKS,
        connect_ip: Optional[str] = None,
        *,
        name: Optional[str] = None,
        wait: str = "hybrid",
        spin_us: float = 10.0,
        spin_max_us: float = 0.0,
        liveness_interval: float = 1.0,
        oob_threshold: int = OOB_THRESHOLD,
    ):
        _check_int("n_reader", n_reader, 1)
        _check_int("n_local_reader", n_local_reader, 0)
        _check_int("max_chunk_bytes", max_chunk_bytes, 1)
        _check_int("max_chunks", max_chunks, 1)
        if n_local_reader > n_reader:
            raise ValueError(f"n_local_reader ({n_local_reader}) exceeds n_reader ({n_reader})")
        if n_reader > n_local_reader:
            raise NotImplementedError(
                f"{n_reader - n_local_reader} remote reader(s) requested (n_reader={n_reader} > "
                f"n_local_reader={n_local_reader}): remote readers are not implemented yet, see the "
                f"{_REMOTE_READERS_ISSUE}")
        if local_reader_ranks is None:
            local_reader_ranks = list(range(n_local_reader))
        else:
            local_reader_ranks = [_check_int("local_reader_ranks[i]", r, 0) for r in local_reader_ranks]
            if len(local_reader_ranks) != n_local_reader:
                raise ValueError(f"local_reader_ranks has {len(local_reader_ranks)} entries, "
                                 f"n_local_reader is {n_local_reader}")
            if len(set(local_reader_ranks)) != len(local_reader_ranks):
                raise ValueError(f"local_reader_ranks has duplicates: {local_reader_ranks}")
        name = name or f"ringcast-py-{os.getpid()}-{uuid.uuid4().hex[:16]}"
        capacity = _capacity_for(max_chunk_bytes, max_chunks)

        self._writer = _core.Writer(name, n_local_reader, capacity, wait=wait, spin_us=spin_us, spin_max_us=spin_max_us,
                                    liveness_s=liveness_interval)
        self._reader = None
        self._finalizer = weakref.finalize(self, _shutdown_writer, self._writer)
        self._is_writer = True
        self._is_local_reader = False
        self._is_remote_reader = False
        self.local_reader_rank = -1
        self.n_reader = n_reader
        self.n_local_reader = n_local_reader
        self.n_remote_reader = 0
        self.max_chunk_bytes = max_chunk_bytes
        self.max_chunks = max_chunks
        self._oob_threshold = oob_threshold
        self._max_parts = self._writer.max_parts
        self.handle = Handle(
            name=name, n_reader=n_reader, local_reader_ranks=list(local_reader_ranks),
            max_chunk_bytes=max_chunk_bytes, max_chunks=max_chunks,
            creation_time_ns=self._writer.creation_time_ns, writer_pid=os.getpid(), wait=wait, spin_us=spin_us,
            spin_max_us=spin_max_us,
            abi_version=_core.ABI_VERSION,
            liveness_interval=liveness_interval, local_subscribe_addr=None,
            remote_subscribe_addr=None, remote_addr_ipv6=False)

    # ---- construction of readers -------------------------------------------------------------
    def export_handle(self) -> Handle:
        return self.handle

    @staticmethod
    def create_from_handle(handle: Handle, rank: int) -> "MessageQueue":
        """Attach as the reader of global `rank` (one of handle.local_reader_ranks)."""
        if not isinstance(handle, Handle):
            raise ValueError(f"expected a ringcast.Handle, got {type(handle).__name__}")
        check_handle_version(handle)
        if rank not in handle.local_reader_ranks:
            raise ValueError(f"rank {rank!r} is not a local reader of queue '{handle.name}' "
                             f"(local_reader_ranks={handle.local_reader_ranks})")
        index = handle.local_reader_ranks.index(rank)
        try:
            info = _core.segment_info(handle.name)
        except ValueError as e:
            raise ValueError(f"stale handle: {e} (its writer shut the queue down or exited)") from None
        if info["creation_time_ns"] != handle.creation_time_ns:
            raise ValueError(f"stale handle: queue '{handle.name}' was re-created after this handle was "
                             "exported")
        try:
            reader = _core.Reader(handle.name, index, wait=handle.wait, spin_us=handle.spin_us,
                                  spin_max_us=vars(handle).get("spin_max_us", 0.0),
                                  liveness_s=handle.liveness_interval)
        except ValueError as e:
            raise ValueError(f"cannot attach rank {rank} to queue '{handle.name}': {e}") from None
        self = MessageQueue.__new__(MessageQueue)
        self._writer = None
        self._reader = reader
        self._finalizer = None
        self._is_writer = False
        self._is_local_reader = True
        self._is_remote_reader = False
        self.local_reader_rank = index
        self.n_reader = handle.n_reader
        self.n_local_reader = len(handle.local_reader_ranks)
        self.n_remote_reader = 0
        self.max_chunk_bytes = handle.max_chunk_bytes
        self.max_chunks = handle.max_chunks
        self._oob_threshold = OOB_THRESHOLD
        self._max_parts = _core.MAX_PARTS
        self.handle = handle
        return self

    def wait_until_ready(self, timeout: Optional[float] = None) -> None:
        """Writer: wait until every local reader has attached. Reader: check that the writer lives."""
        if self._is_writer:
            self._writer.wait_readers(timeout)
        else:
            self._reader.check_writer_alive()

    # ---- objects -------------------------------------------------------------------------------
    def _dumps(self, obj: Any) -> list:
        oob: list = []
        limit = self._max_parts - 1
        threshold = self._oob_threshold

        def callback(pb: pickle.PickleBuffer) -> bool:  # True: keep in-band
            if len(oob) >= limit:
                return True
            try:
                raw = pb.raw()
            except BufferError:  # not contiguous
                return True
            if raw.nbytes < threshold:
                return True
            # A whole bytes object is passed as itself: the receiver then rebuilds a bytes, not a bytearray.
            o = raw.obj
            oob.append(o if type(o) is bytes and len(o) == raw.nbytes else raw)
            return False

        # The C pickler serializes bytes/bytearray in-band before any hook runs; a large one passed as
        # the message itself is wrapped so it travels out-of-band (no copy into the pickle).
        if type(obj) in (bytes, bytearray, memoryview) and len(obj) >= threshold:
            obj = pickle.PickleBuffer(obj)
        data = pickle.dumps(obj, protocol=5, buffer_callback=callback)
        return [data, *oob]

    @staticmethod
    def _loads(parts: list) -> Any:
        return pickle.loads(parts[0], buffers=parts[1:])

    def _require_writer(self, what: str) -> None:
        if not self._is_writer:
            raise RuntimeError(f"{what}: only the writer (the MessageQueue constructor's side) can write")

    def _require_reader(self, what: str) -> None:
        if self._is_writer:
            raise RuntimeError(f"{what}: the writer cannot read; readers come from create_from_handle()")

    def enqueue(self, obj: Any, timeout: Optional[float] = None) -> None:
        """Send `obj` to every reader. Blocks (GIL released) while the slowest reader holds the ring."""
        self._require_writer("enqueue")
        self._writer.send(self._dumps(obj), timeout)

    def dequeue(self, timeout: Optional[float] = None, indefinite: bool = False) -> Any:
        """The next object. `indefinite` is accepted for vLLM compatibility (no periodic warnings here)."""
        self._require_reader("dequeue")
        return self._loads(self._reader.recv(timeout))

    def dequeue_many(self, max_n: int, timeout: Optional[float] = None) -> List[Any]:
        """Waits up to `timeout` for one object, then also takes every further complete one that is
        ready (up to max_n) in the same call: one GIL acquisition per burst, not per message."""
        self._require_reader("dequeue_many")
        _check_int("max_n", max_n, 1)
        return [self._loads(parts) for parts in self._reader.recv_many(max_n, timeout)]

    def broadcast_object(self, obj: Any = None) -> Any:
        if self._is_writer:
            self.enqueue(obj)
            return obj
        return self.dequeue()

    # ---- raw chunks (zero-copy) ---------------------------------------------------------------
    @contextmanager
    def acquire_write(self, timeout: Optional[float] = None, size: Optional[int] = None) -> Iterator[memoryview]:
        """A writable memoryview of `size` (default max_chunk_bytes) bytes inside the ring, published to
        every reader when the block exits normally (dropped if it raises). Readers get it with
        acquire_read(). The view must not outlive the block."""
        self._require_writer("acquire_write")
        buf = self._writer.reserve_raw(self.max_chunk_bytes if size is None else size, timeout)
        ok = False
        try:
            yield buf
            ok = True
        finally:
            leaked = None
            try:
                buf.release()
            except BufferError as e:
                leaked = e
            self._writer.commit_raw(publish=ok)
            if leaked is not None and ok:
                raise RingcastError("acquire_write: a view of the ring buffer outlived the with-block "
                                    "(the chunk was published; writing through that view now corrupts "
                                    "later messages)") from leaked

    @contextmanager
    def acquire_read(self, timeout: Optional[float] = None, indefinite: bool = False) -> Iterator[memoryview]:
        """A read-only view of the next chunk written with acquire_write(), valid inside the block;
        the chunk is consumed when the block exits."""
        self._require_reader("acquire_read")
        buf = self._reader.peek_raw(timeout)
        try:
            yield buf
        finally:
            try:
                buf.release()
            except BufferError:
                pass  # a derived view outlived the block; the ring space is released regardless
            self._reader.release_raw()

    # ---- end -----------------------------------------------------------------------------------
    def shutdown(self) -> None:
        """Writer: readers drain what was sent, then get ClosedError; the shm name is removed.
        Reader: later calls raise ClosedError (the rank detaches when the object is collected).
        Either way a call blocked in another thread wakes with ClosedError."""
        if self._is_writer:
            self._writer.shutdown()
            if self._finalizer is not None:
                self._finalizer.detach()
        else:
            self._reader.shutdown()

    @property
    def name(self) -> str:
        return self.handle.name

    def __repr__(self) -> str:
        role = "writer" if self._is_writer else f"reader {self.local_reader_rank}"
        return f"<ringcast.MessageQueue {self.handle.name!r} {role}, {self.n_local_reader} local readers>"
