"""MessageQueue and Handle: vLLM's shm_broadcast API on top of ringcast._core.

Objects are pickled with protocol 5; buffers of at least ``oob_threshold`` bytes travel out of band
(see MessageQueue). Ownership of received objects: every object dequeue() returns owns its memory (the
reader copies each part straight from the ring into a fresh bytes/bytearray before the ring space is
released), so it stays valid forever and is independent of the queue. acquire_read() is the zero-copy
exception: its memoryview is valid only inside the with-block.
"""

from __future__ import annotations

import numbers
import os
import pickle
import threading
import time
import uuid
import weakref
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Coroutine, Iterator, List, Optional

from ringcast import _core, _gpu
from ringcast._args import (MAX_CAPACITY, MAX_RANK, _aio_refuse, _check_int, _check_timeout, _in_python_terms,
                            check_byte_count, check_endpoint_types, check_handle_version, raise_in_callers_terms,
                            require_remote, retold)
from ringcast._blocks import end_block
from ringcast._burst import BurstReads
from ringcast._cpus import usable_cpus
from ringcast._pickling import _integer_threshold, dumps_out_of_band, pickle5
from ringcast._sweep import GENERATED_PREFIX, sweep_generated_names

# Buffers (numpy arrays, pickle.PickleBuffer, a top-level bytes/bytearray/memoryview) of at least this
# many bytes travel out-of-band: copied from the object straight into the ring, and from the ring
# straight into the buffer the receiver's object is rebuilt on. Smaller ones stay inside the pickle.
OOB_THRESHOLD = 4096

# The default ring: 2 MiB x 8 = 16 MiB of /dev/shm (vLLM's 10 MiB x 10 would take 128 MiB, twice Docker's
# default /dev/shm). Fragments let any message through a small ring, and a bigger ring is not faster:
# measured on a 16-core machine (bench/python/bench_ring_size.py, 2 readers, 3 runs), 1 MiB messages
# reach 8.6 / 8.4 / 8.0 / 5.6 / 4.5 GB/s with 1 / 4 / 16 / 64 / 128 MiB rings (a big ring leaves the
# caches), 64 MiB messages 1.4 GB/s with every size. 16 MiB keeps room for ~16 MiB of steps in flight.
DEFAULT_MAX_CHUNK_BYTES = 2 * 1024 * 1024
DEFAULT_MAX_CHUNKS = 8
# The most remote readers a queue takes (n_reader - n_local_reader): each is a TCP connection that the
# publisher's one thread serves every message; the bound refuses a count that would take minutes (or all
# memory) to list before anything failed.
MAX_REMOTE_READERS = 65536
_REMOTE_DRAIN_S = 30.0  # shutdown(): how long slow remote readers may take to be handed the last messages


# The default adaptive spin: an endpoint spins about twice as long as its recent waits lasted, up to
# this long (politely: it yields every few microseconds and sleeps when the CPU is mostly wanted), and only spin_us
# once its waits have been longer — an idle queue costs no CPU. Measured on a 16-core machine, it halves
# the synchronous step's overhead against sleeping after spin_us (docs/benchmarks.md).
# 5 ms, not the C++ reader's 2 ms: a worker's wait for the next request lasts the executor's
# preparation less the worker's own step, and a Python preparation of 2 ms stretches to 3-4 ms in a
# VM's slow episodes — waits of 2-3 ms that a 2 ms cap ended in a sleep and the enqueue's wake-up
# (16-core machine, async: up to 1.07 kernel sleeps per step against at most 0.11 with 5 ms; the
# overhead's median at W=8 49 / 43 -> 25 / 31 us and 51 / 59 -> 45 / 52 in two calls, single / all,
# at W=2 unchanged within the scatter; docs/benchmarks.md). It costs CPU only while steps run: an idle
# reader spins at most this long once, then sleeps.
DEFAULT_SPIN_MAX_US = 5000.0
# ... where every process of the queue has a CPU of its own. Where they share CPUs, a longer spin takes
# the CPU from the process it waits for: on the 2-core VM (executor + 2 workers) the 5 ms cap made an
# async step's overhead ~1.2 ms in 3-4 runs of 5 (the workers spinning through the executor's
# preparation), against 32-146 us with 2 ms in the same runs. There the cap stays the C++ default, 2 ms.
SHARED_CPUS_SPIN_MAX_US = _core.SPIN_MAX_US


def default_spin_max_us(n_local_reader: int) -> float:
    """MessageQueue's cap on the adaptive spin when none is given: DEFAULT_SPIN_MAX_US where there is
    a CPU for the writer and each local reader (usable_cpus(): a container's CPU set and CPU quota
    count), else SHARED_CPUS_SPIN_MAX_US."""
    return DEFAULT_SPIN_MAX_US if usable_cpus() >= n_local_reader + 1 else SHARED_CPUS_SPIN_MAX_US


@dataclass
class Handle:
    """Everything a reader process needs to attach to a MessageQueue; picklable.

    Get it from the writer's ``MessageQueue.export_handle()``, send it to the reader processes (as a
    ``multiprocessing`` argument, fork or spawn, or pickled over any channel) and attach there with
    ``MessageQueue.create_from_handle(handle, rank)``. Build none by hand: a handle from another
    ringcast version, or one whose queue was shut down or re-created, is refused with ValueError.

    Attributes:
        name: the queue's /dev/shm name.
        n_reader: total reader ranks (vLLM): the local ones plus the remote ones.
        local_reader_ranks: the global rank of each local reader; a reader attaches as one of them.
        max_chunk_bytes: the constructor's max_chunk_bytes (with max_chunks it sized the ring; the
            default size of acquire_write()).
        max_chunks: the constructor's max_chunks.
        creation_time_ns: when the segment was created; tells a stale handle from a re-created
            segment of the same name.
        writer_pid: pid of the writer process.
        wait: the wait strategy the readers use ('hybrid', 'futex', 'spin', 'spin_yield').
        spin_us: hybrid: microseconds a reader spins before sleeping in the kernel.
        spin_max_us: hybrid: above spin_us the readers' spin is adaptive, up to this long.
        liveness_interval: seconds between a blocked reader's checks that the writer lives.
        local_subscribe_addr: vLLM field, always None (kept for code that inspects it).
        remote_subscribe_addr: the remote publisher's ZeroMQ endpoint ("tcp://IP:PORT"); None without
            remote readers.
        remote_addr_ipv6: whether that endpoint is IPv6.
        remote_reader_ranks: the global ranks that attach over ZeroMQ (the ranks of range(n_reader) not
            in local_reader_ranks).
        remote_curve_public_key: the publisher's CURVE public key ("" without CURVE); remote readers
            use it to authenticate the publisher and encrypt the stream.
        abi_version: the ringcast ABI of the exporting process (-1 in a handle built by hand).
    """

    name: str
    n_reader: int
    local_reader_ranks: List[int]
    max_chunk_bytes: int
    max_chunks: int
    creation_time_ns: int  # tells a stale handle from a re-created segment of the same name
    writer_pid: int
    wait: str = "hybrid"
    spin_us: float = 10.0  # hybrid: how long a waiter spins before sleeping in the kernel
    spin_max_us: float = DEFAULT_SPIN_MAX_US  # hybrid: > spin_us makes the spin adaptive, up to this long
    liveness_interval: float = 1.0
    # vLLM Handle fields; the remote ones are set when n_reader > n_local_reader.
    local_subscribe_addr: Optional[str] = None
    remote_subscribe_addr: Optional[str] = None
    remote_addr_ipv6: bool = False
    # The ringcast ABI the exporting process spoke; -1 in a handle built by hand (set by export).
    abi_version: int = -1
    remote_reader_ranks: List[int] = field(default_factory=list)
    remote_curve_public_key: str = ""

    @property
    def buffer_handle(self):
        """vLLM's ``(n_reader, max_chunk_bytes, max_chunks, name)`` tuple, for code that inspects it."""
        return (self.n_reader, self.max_chunk_bytes, self.max_chunks, self.name)


def _capacity_for(max_chunk_bytes: int, max_chunks: int) -> int:
    # max_chunk_bytes * max_chunks sizes the ring as in vLLM; the ring's largest record is a quarter of
    # it, and acquire_write() must be able to hand out max_chunk_bytes in one record.
    need = max(max_chunk_bytes * max_chunks, 4 * (max_chunk_bytes + 16), _core.MIN_CAPACITY)
    return 1 << (need - 1).bit_length()


def _shutdown_writer(core_writer, publisher=None) -> None:  # weakref.finalize callback: must not reference the queue
    core_writer.shutdown()
    if publisher is not None:  # hand the rest and the close to ZeroMQ (bounded), then let it flush and stop
        publisher.drain(_REMOTE_DRAIN_S)
        publisher.stop()


class MessageQueue(BurstReads):
    """One writer -> ``n_local_reader`` reader processes over a shared-memory ring.

    Every reader gets every message, in order. The constructor makes the writer (and the /dev/shm
    segment); send ``export_handle()`` to each reader process, which attaches with
    ``MessageQueue.create_from_handle(handle, rank)``. Same constructor and methods as vLLM's
    shm_broadcast MessageQueue (switch by changing the import), plus keyword-only options.

    Args:
        n_reader: total reader ranks (vLLM: local and remote). The ranks of range(n_reader) that are
            not in local_reader_ranks are remote readers: they attach over ZeroMQ from other machines
            (``create_from_handle`` there) and need ``connect_ip``; at most MAX_REMOTE_READERS
            (65536) of them. See docs/remote.md.
        n_local_reader: reader ranks on this machine, attached through shared memory (at most
            1024, ``_core.MAX_READERS``; 1023 with remote readers, whose publisher takes one of the
            ring's ranks); each gets its own cursor in the ring, and the writer waits for the slowest one,
            including ranks that have not attached yet.
        local_reader_ranks: the global rank of each local reader (default ``range(n_local_reader)``):
            n_local_reader distinct ints; ``create_from_handle`` takes one of them.
        max_chunk_bytes: with max_chunks, sizes the ring as in vLLM: the ring is the next power of two
            >= max(max_chunk_bytes * max_chunks, 4 * (max_chunk_bytes + 16), 64 KiB) bytes of
            /dev/shm. The defaults, 2 MiB x 8, give a 16 MiB ring (vLLM's 10 MiB x 10 would take
            128 MiB): measured, a bigger ring is not faster (1 MiB messages: 8.0 GB/s to each of 2
            readers with 16 MiB, 4.5 GB/s with 128 MiB; 64 MiB messages 1.4 GB/s with any size,
            16-core machine). Also the default size of
            acquire_write(). At most 2**38 - 16 (a record of the largest ring, 1 TiB), and
            max_chunk_bytes * max_chunks at most 1 TiB. It does not cap a message: a larger one is split into records of at
            most capacity/4 - 16 bytes that stream through the ring.
        max_chunks: see max_chunk_bytes: the ring holds about max_chunks messages of
            max_chunk_bytes before the writer waits for the slowest reader.
        connect_ip: with remote readers: the literal IPv4/IPv6 address of this machine's interface
            the remote readers reach; the publisher binds there only (hostnames and '*' are refused;
            '0.0.0.0' / '::' mean every interface and must be asked for). Ignored without remote
            readers. Keyword-only remote options: remote_port (0: ephemeral, reported in the handle),
            remote_slow_reader ('block': a slow remote reader holds the writer, bounded; 'drop_after':
            it is cut off after 5 s at the high-water mark and raises FellBehindError),
            remote_high_water_mark (messages queued per remote reader on each side, default 16),
            curve_secret_key / curve_allowed_clients (CURVE encryption and client keys; docs/remote.md),
            remote_reader_ranks (the remote readers' ranks: n_reader - n_local_reader distinct ints
            not in local_reader_ranks; default the smallest such ints, which fits an executor whose
            ranks are 0..n_reader-1 but not vLLM's process-group numbering, where the writer's own
            group rank is no reader's: create_from_process_group passes them).
        name: the /dev/shm name, 1..200 characters of [A-Za-z0-9._-] not starting with '.'
            (default: a unique one). Removed again by shutdown().
        wait: how a blocked call waits: 'hybrid' (default: spin spin_us, then sleep in the kernel),
            'futex' (sleep at once), 'spin' (busy-spin, never sleeps: a whole core per waiter) or
            'spin_yield' (sched_yield loop, never sleeps). Travels in the handle to the readers.
        spin_us: hybrid: microseconds to spin before sleeping (default 10); readers too.
        spin_max_us: hybrid: above spin_us the spin adapts: each endpoint spins about twice as long
            as its recent waits lasted, up to spin_max_us, and only spin_us once its waits have been
            longer than that; the spin yields the CPU every few microseconds and, past spin_us,
            stops once other threads took most of it (low latency while steps come quickly, no CPU once idle). Waits at a steady
            rhythm that are longer, or often outlast it, are predicted: sleep until shortly before the expected end, then spin a
            short window (docs/python.md). Default None: 5000 (5 ms) where the machine has a CPU for the
            writer and each local reader, else 2000 (default_spin_max_us); 0 turns both off (spin spin_us,
            then sleep).
        liveness_interval: seconds between dead-peer checks while blocked (``liveness_s`` in
            ringcast._core; default 1.0, must be > 0): a dead peer raises PeerDeadError within two
            intervals. Travels in the handle.
        oob_threshold: buffers (numpy arrays, pickle.PickleBuffer, a bytes/bytearray/memoryview
            sent as the message itself) of at least this many bytes travel out of band: copied from
            the object straight into the ring, and from the ring straight into the receiver's
            buffer, never through the pickle. Smaller ones stay inside the pickle. Writer only;
            default OOB_THRESHOLD (4096).
        wake_ahead: enqueue wakes the readers that sleep before it pickles the message, not after
            it copied it into the ring, so that their wake-up (tens of microseconds where the kernel
            must wake an idle CPU) runs while the message is made; a reader woken so spins for it about
            twice as long as such messages took, then sleeps again. Only with the adaptive hybrid
            wait (the default: wait='hybrid', spin_max_us > spin_us). Writer only; default True
            (False: readers are woken by the publish alone; docs/python.md).
        sweep_abandoned: before creating, remove this user's segments with generated names
            (``ringcast-py-*``, the names MessageQueue and ReplyGather choose when given none)
            whose creator, writer and readers are all dead — killed processes leave them in
            /dev/shm — and log one warning line saying how much was freed. Names you chose are
            never swept here (``ringcast gc`` sweeps every abandoned one). Default True.

    Attributes:
        handle: the Handle (export_handle() returns it).
        n_reader, n_local_reader, max_chunk_bytes, max_chunks: as given.
        n_remote_reader: n_reader - n_local_reader.
        local_reader_rank: a reader's index into local_reader_ranks; -1 on the writer.

    Raises:
        TypeError: a count or rank that is not an int.
        ValueError: a count < 1 or above its limit (n_local_reader, the remote readers,
            max_chunk_bytes and max_chunks: see above; a rank above 2**32-1), n_local_reader >
            n_reader, local_reader_ranks of the wrong length or with duplicates, an unknown wait, a
            negative, non-finite or too long spin, liveness_interval not in (0, 1 day], a bad name
            or one already in use, an empty name.
        ValueError: remote readers without connect_ip, or a connect_ip that is not a literal address.
        OSError: remote_port in use (errno EADDRINUSE).
        ImportError: remote readers in a ringcast built without ZeroMQ (``_core.HAVE_REMOTE``).
        PermissionError: /dev/shm refused to create the segment (permission denied).
        MemoryError: /dev/shm has no room for the ring. OSError: another system call failed.

    Timeouts (every blocking method): seconds; None waits forever, 0 polls (what is ready now, else
    TimeoutError at once), a negative value raises ValueError. The GIL is never held while
    blocked: a call takes what is ready without dropping the GIL, and only then waits in the kernel
    with it released (in the main thread a signal ends the wait: Ctrl-C raises KeyboardInterrupt).

    Dead peers: a blocked writer checks the readers it waits for, and a blocked reader the writer,
    every liveness_interval; PeerDeadError names the dead process (pid; a reader's rank index)
    within two intervals of the later of its death and the call blocking. A stopped (SIGSTOP) or
    slow peer is alive: the call times out.

    Clean exit: a reader that leaves (its shutdown(), or its MessageQueue garbage-collected, e.g.
    when the worker function returns) releases its rank: the writer (for a remote reader, the
    publisher) stops keeping messages for it and never waits for it again (a writer blocked on it
    wakes at once); attaching that local rank again raises ValueError. The writer's shutdown() (or its garbage collection) closes the queue: readers
    drain what was sent, then get ClosedError.

    One thread at a time per MessageQueue: a second thread's concurrent call raises RuntimeError
    (shutdown() works from any thread). After fork the child cannot use the parent's queue
    (RingcastError) and never closes it; it attaches its own from the handle.
    """

    # Set by the constructor or create_from_handle: a writer has _writer, a reader _reader, the other one
    # is None (_require_writer/_require_reader check the role first).
    handle: Handle  # what export_handle() returns; a reader keeps the one it attached with
    _writer: Any
    # The step's calls without pybind11's dispatcher (the binding's FastEntry objects, made once per
    # endpoint: a dispatch whose code went out of the caches costs ~1 us, fastcall.hpp):
    _send_object: Any = None  # the writer's Writer.send_object, where enqueue may use it
    _recv_object: Any = None  # a local reader's Reader.recv_object
    _wake_ahead: bool = False  # the writer's: enqueue wakes sleeping readers before it pickles
    _reader: Any
    _finalizer: Any

    def __init__(
        self,
        n_reader: int,
        n_local_reader: int,
        local_reader_ranks: Optional[List[int]] = None,
        max_chunk_bytes: int = DEFAULT_MAX_CHUNK_BYTES,
        max_chunks: int = DEFAULT_MAX_CHUNKS,
        connect_ip: Optional[str] = None,
        *,
        name: Optional[str] = None,
        wait: str = "hybrid",
        spin_us: float = 10.0,
        spin_max_us: Optional[float] = None,
        liveness_interval: float = 1.0,
        oob_threshold: int = OOB_THRESHOLD,
        sweep_abandoned: bool = True,
        wake_ahead: bool = True,
        remote_port: int = 0,
        remote_slow_reader: str = "block",
        remote_high_water_mark: int = 16,
        curve_secret_key: Optional[str] = None,
        curve_allowed_clients: Optional[List[str]] = None,
        remote_reader_ranks: Optional[List[int]] = None,
    ):
        n_reader = _check_int("n_reader", n_reader, 1)
        n_local_reader = _check_int("n_local_reader", n_local_reader, 0)
        max_chunk_bytes = _check_int("max_chunk_bytes", max_chunk_bytes, 1)
        max_chunks = _check_int("max_chunks", max_chunks, 1)
        check_endpoint_types(name, wait, spin_us, spin_max_us, liveness_interval, spin_max_us_may_be_none=True)
        if not isinstance(wake_ahead, bool):  # ("no" was taken as true)
            raise TypeError(f"wake_ahead must be a bool, got {type(wake_ahead).__name__}")
        check_byte_count("oob_threshold", oob_threshold)
        if n_local_reader > n_reader:
            raise ValueError(f"n_local_reader ({n_local_reader}) exceeds n_reader ({n_reader})")
        # The limits before anything is built from the counts (a list of n_reader ranks would take
        # minutes, or all memory, before the core refused them).
        n_remote = n_reader - n_local_reader
        if n_remote and n_local_reader > _core.MAX_READERS - 1:
            raise ValueError(f"n_local_reader must be at most {_core.MAX_READERS - 1} when the queue has remote "
                             f"readers (n_reader={n_reader} > n_local_reader): the publisher that serves them takes "
                             f"one of the ring's {_core.MAX_READERS} reader ranks; got {n_local_reader}")
        _check_int("n_local_reader", n_local_reader, 0, _core.MAX_READERS, "the reader ranks of a ring")
        if n_remote > MAX_REMOTE_READERS:
            raise ValueError(f"n_reader must be at most n_local_reader + {MAX_REMOTE_READERS} (at most "
                             f"{MAX_REMOTE_READERS} remote readers), got n_reader={n_reader} with n_local_reader="
                             f"{n_local_reader}: {n_remote} remote readers")
        if 4 * (max_chunk_bytes + 16) > MAX_CAPACITY:
            raise ValueError(f"max_chunk_bytes must be at most {MAX_CAPACITY // 4 - 16} (acquire_write's chunk is "
                             f"a record of the ring, at most a quarter of the largest ring, 1 TiB, less 16 bytes), "
                             f"got {max_chunk_bytes}")
        if max_chunk_bytes * max_chunks > MAX_CAPACITY:
            raise ValueError(f"max_chunk_bytes * max_chunks must be at most {MAX_CAPACITY} (1 TiB, the largest "
                             f"ring), got {max_chunk_bytes} * {max_chunks}")
        if n_remote:  # before the remote ranks are listed: without ZeroMQ or connect_ip they are refused
            require_remote(f"{n_remote} remote reader(s) (n_reader={n_reader} > n_local_reader="
                           f"{n_local_reader})", connect_ip, "the remote readers", "the publisher")
            _check_int("remote_port", remote_port, 0, 65535)
            _check_int("remote_high_water_mark", remote_high_water_mark, 1, 2**31 - 1)
        if local_reader_ranks is None:
            local_reader_ranks = list(range(n_local_reader))
        else:
            local_reader_ranks = [_check_int("local_reader_ranks[i]", r, 0, MAX_RANK) for r in local_reader_ranks]
            if len(local_reader_ranks) != n_local_reader:
                raise ValueError(f"local_reader_ranks has {len(local_reader_ranks)} entries, "
                                 f"n_local_reader is {n_local_reader}")
            if len(set(local_reader_ranks)) != len(local_reader_ranks):
                raise ValueError(f"local_reader_ranks has duplicates: {local_reader_ranks}")
        if sweep_abandoned:
            sweep_generated_names()
        name = name if name is not None else f"{GENERATED_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:16]}"
        capacity = _capacity_for(max_chunk_bytes, max_chunks)
        local_set = set(local_reader_ranks)
        if remote_reader_ranks is None:
            remote_ranks = [r for r in range(n_reader + n_local_reader) if r not in local_set][:n_reader - n_local_reader]
        else:
            remote_ranks = [_check_int("remote_reader_ranks[i]", r, 0, MAX_RANK) for r in remote_reader_ranks]
            if len(remote_ranks) != n_reader - n_local_reader:
                raise ValueError(f"remote_reader_ranks has {len(remote_ranks)} entries, n_reader - n_local_reader "
                                 f"is {n_reader - n_local_reader}")
            if len(set(remote_ranks)) != len(remote_ranks) or local_set & set(remote_ranks):
                raise ValueError(f"remote_reader_ranks {remote_ranks} has duplicates or ranks of local_reader_ranks "
                                 f"{local_reader_ranks}")
        if spin_max_us is None:  # the publisher's thread, a reader of the ring too, counts as a process
            spin_max_us = default_spin_max_us(n_local_reader + (1 if remote_ranks else 0))

        # With remote readers the ring has one more rank: the publisher's, so the ring's back-pressure
        # covers what it has not sent yet. Without, the ring is exactly the local one.
        self._writer = _core.Writer(name, n_local_reader + (1 if remote_ranks else 0), capacity, wait=wait,
                                    spin_us=spin_us, spin_max_us=spin_max_us, liveness_s=liveness_interval)
        self._reader = None
        self._publisher = None
        if remote_ranks:
            try:
                self._publisher = _core.RemotePublisher(
                    name, n_local_reader, connect_ip or "", remote_port, remote_ranks,
                    high_water_mark=remote_high_water_mark, slow_reader=remote_slow_reader,
                    heartbeat_s=liveness_interval / 5, liveness_s=liveness_interval,
                    curve_secret_key=curve_secret_key or "", curve_allowed_clients=list(curve_allowed_clients or []),
                    wait=wait, spin_us=spin_us, spin_max_us=spin_max_us)
                self._writer.set_remote_publisher_index(n_local_reader)
            except BaseException:
                self._writer.shutdown()
                raise
        self._finalizer = weakref.finalize(self, _shutdown_writer, self._writer, self._publisher)
        self._is_writer = True
        self._burst_left = []  # (a writer's stays empty: it never reads)
        self._is_local_reader = False
        self._is_remote_reader = False
        self.local_reader_rank = -1
        self.n_reader = n_reader
        self.n_local_reader = n_local_reader
        self.n_remote_reader = len(remote_ranks)
        self.max_chunk_bytes = max_chunk_bytes
        self.max_chunks = max_chunks
        self._oob_threshold = oob_threshold
        self._max_parts = self._writer.max_parts
        # enqueue's one-call path pickles inside the binding with the same rule as dumps_out_of_band
        # (`nbytes < oob_threshold` stays in-band: the same as an integer threshold of the ceiling, 0 for
        # one <= 0); a _pickle of its own (ringcast.vllm's tensor pickler), as the queue has it when
        # made, keeps the Python path.
        self._writer.set_out_of_band(_integer_threshold(oob_threshold), self._max_parts - 1)
        self._writer.set_reader_ranks(list(local_reader_ranks))  # a dead reader's error names its rank
        self._send_object = self._writer.fast_send_object() if self._pickle is pickle5 else None
        # While a GPU array library is loaded, send_object pickles with the device pickler and hands a
        # message with device arrays back to enqueue for the GPU path.
        self._writer.set_device_pickler(self._device_pickler_factory(), list(_gpu.DEVICE_ARRAY_LIBRARIES))
        # On only with the adaptive hybrid wait (the writer decides: Writer.set_wake_ahead).
        self._writer.set_wake_ahead(bool(wake_ahead))
        self._wake_ahead = self._writer.wake_ahead_enabled
        self.handle = Handle(
            name=name, n_reader=n_reader, local_reader_ranks=list(local_reader_ranks),
            max_chunk_bytes=max_chunk_bytes, max_chunks=max_chunks,
            creation_time_ns=self._writer.creation_time_ns, writer_pid=os.getpid(), wait=wait, spin_us=spin_us,
            spin_max_us=spin_max_us,
            abi_version=_core.ABI_VERSION,
            liveness_interval=liveness_interval, local_subscribe_addr=None,
            remote_subscribe_addr=self._publisher.endpoint if self._publisher else None,
            remote_addr_ipv6=bool(self._publisher) and ":" in (connect_ip or ""), remote_reader_ranks=remote_ranks,
            remote_curve_public_key=self._publisher.curve_public_key if self._publisher else "")

    def export_handle(self) -> Handle:
        """The Handle the reader processes attach with (picklable; the same object as ``self.handle``).

        Returns:
            Handle: pass it with a rank to ``MessageQueue.create_from_handle`` in each reader process.
        """
        return self.handle

    @staticmethod
    def create_from_handle(handle: Handle, rank: int, *, remote_addr: Optional[str] = None,
                           curve_public_key: Optional[str] = None,
                           curve_secret_key: Optional[str] = None) -> "MessageQueue":
        """Attaches this process as the reader of global rank ``rank``.

        A late reader misses nothing: the writer keeps every message for a rank that has not
        attached yet (and waits for it once the ring is full). A rank whose reader died may be
        attached by a replacement process, which resumes where the dead one stopped; a rank whose
        reader left cleanly is released for good (see the class docstring, "Clean exit").

        Args:
            handle: the writer's ``export_handle()``.
            rank: an int (numpy's integers too), one of ``handle.local_reader_ranks`` (shared memory) or of
                ``handle.remote_reader_ranks`` (ZeroMQ, from any machine that reaches
                ``handle.remote_subscribe_addr``; call wait_until_ready() next).
            remote_addr: remote ranks: the publisher endpoint to connect to ("tcp://IP:PORT"), when
                this machine reaches the writer by another address than ``handle.remote_subscribe_addr``
                (default) — a writer that bound every interface (connect_ip "0.0.0.0" or "::") exports
                that wildcard, which no other machine can connect to.
            curve_public_key, curve_secret_key: remote ranks of a writer with CURVE: this reader's
                keypair (``curve_keypair()``, Z85), the one whose public key is in the writer's
                ``curve_allowed_clients``. Both or neither; without them the reader makes a fresh
                keypair, which a writer with an allow-list refuses (docs/remote.md, CURVE).

        Returns:
            MessageQueue: the reader side (dequeue, dequeue_many, acquire_read, broadcast_object).

        Raises:
            ValueError: not a Handle, a handle from another ringcast version, a handle whose name is
                not a valid segment name, a rank in neither
                local_reader_ranks nor remote_reader_ranks (both are named), a stale handle (the queue
                was shut down or re-created), a rank already attached by a live process or released
                by a clean exit (Python has no keep_place: a released rank cannot come back).
            SegmentError: (a ValueError too) the segment is there but not a ringcast segment this
                library can use: another program's object, another version's, a corrupt header.
            TypeError: a rank that is not an int.
            PermissionError: the segment belongs to another user (segments are owner-only, 0600).
        """
        if not isinstance(handle, Handle):
            raise ValueError(f"expected a ringcast.Handle, got {type(handle).__name__}")
        check_handle_version(handle)
        # 0.0 == 0 would attach rank 0; numpy's ints are ints (as everywhere else)
        if isinstance(rank, bool) or not isinstance(rank, numbers.Integral):
            raise TypeError(f"rank must be an int, got {type(rank).__name__}")
        rank = int(rank)
        remote_ranks = list(vars(handle).get("remote_reader_ranks", []))
        if rank in remote_ranks:
            return MessageQueue._attach_remote(handle, rank, remote_addr, curve_public_key, curve_secret_key)
        if remote_addr is not None:
            raise ValueError(f"remote_addr is for a remote reader rank; rank {rank} attaches through shared memory")
        if curve_public_key is not None or curve_secret_key is not None:
            raise ValueError(f"curve_public_key/curve_secret_key are for a remote reader rank; rank {rank} attaches "
                             "through shared memory")
        if rank not in handle.local_reader_ranks:
            if remote_ranks:
                readers = (f"local_reader_ranks={handle.local_reader_ranks}, attached through shared memory on "
                           f"the writer's machine; remote_reader_ranks={remote_ranks}, which this call attaches "
                           f"over ZeroMQ to the writer's publisher ({handle.remote_subscribe_addr}) from any "
                           "machine that reaches it")
            else:
                readers = f"local_reader_ranks={handle.local_reader_ranks}; the queue has no remote readers"
            raise ValueError(f"rank {rank!r} is not a local reader of queue '{handle.name}', nor a remote "
                             f"one ({readers})")
        index = handle.local_reader_ranks.index(rank)
        try:
            info = _core.segment_info(handle.name)
        except ValueError as e:
            if str(e).startswith("segment name "):  # no queue could have it: not stale, a bad handle
                raise ValueError(f"cannot attach rank {rank}: the handle's name {handle.name!r} is not a valid "
                                 f"segment name ({e}), so no writer made it: use the handle its writer's "
                                 "export_handle() returned") from None
            path = os.path.join("/dev/shm", handle.name)
            if not os.path.exists(path):
                raise ValueError(f"stale handle: {e} (its writer shut the queue down or exited, or its name "
                                 "was removed: `ringcast rm`, `ringcast gc`)") from None
            if "foreign magic" not in str(e):  # it says what it is (a directory, truncated, ...)
                raise retold(e, f"cannot attach rank {rank} to queue '{handle.name}': {e}") from None
            # The segment is there but not ringcast's: a header overwritten (corrupt) or a foreign
            # object of that name — not a stale handle, which would find nothing.
            raise retold(e, f"cannot attach rank {rank} to queue '{handle.name}': {e}; the segment exists, so "
                            "its header was overwritten (corrupt) or another program made an object of that "
                            "name") from None
        if info["creation_time_ns"] != handle.creation_time_ns:
            raise ValueError(f"stale handle: queue '{handle.name}' was re-created after this handle was "
                             "exported")
        try:
            # A handle pickled without the field (none this version exports) gets the writer's rule.
            spin_max_us = (handle.spin_max_us if "spin_max_us" in vars(handle)
                           else default_spin_max_us(len(handle.local_reader_ranks)))
            reader = _core.Reader(handle.name, index, wait=handle.wait, spin_us=handle.spin_us,
                                  spin_max_us=spin_max_us, liveness_s=handle.liveness_interval)
        except ValueError as e:
            # The core counts the ring's reader slots ("rank 1 of segment 'q'"): the slot of global rank
            # `rank` is `index`, which only equals it while local_reader_ranks is 0..n-1.
            reason = _in_python_terms(e).replace(f"rank {index} of segment '{handle.name}'", f"rank {rank}")
            raise retold(e, f"cannot attach rank {rank} to queue '{handle.name}': {reason}") from None
        return MessageQueue._reader_side(handle, reader, local_reader_rank=index, n_remote_reader=0)

    @staticmethod
    def _attach_remote(handle: Handle, rank: int, remote_addr: Optional[str], curve_public_key: Optional[str],
                       curve_secret_key: Optional[str]) -> "MessageQueue":
        # A reader rank on another machine: the same methods, over ZeroMQ (bindings/python/src/remote.cpp).
        if not getattr(_core, "HAVE_REMOTE", False):
            raise ImportError(f"rank {rank} is a remote reader, but this ringcast was built without ZeroMQ")
        reader = _core.RemoteReader(remote_addr or handle.remote_subscribe_addr or "", rank, liveness_s=handle.liveness_interval,
                                    curve_server_key=handle.remote_curve_public_key,
                                    # this reader's own keypair: a writer with curve_allowed_clients admits
                                    # only listed keys, and without one the reader makes a fresh key nobody
                                    # listed (the C++ side refuses one key without the other)
                                    curve_public_key=curve_public_key or "", curve_secret_key=curve_secret_key or "")
        return MessageQueue._reader_side(handle, reader, local_reader_rank=-1,
                                         n_remote_reader=len(handle.remote_reader_ranks))

    @staticmethod
    def _reader_side(handle: Handle, reader: Any, local_reader_rank: int, n_remote_reader: int) -> "MessageQueue":
        """A reader's MessageQueue around its compiled reader: a local one (_core.Reader, its rank
        index) or a remote one (_core.RemoteReader, local_reader_rank -1). One place for the fields."""
        self = MessageQueue.__new__(MessageQueue)
        self._writer = None
        self._publisher = None
        self._reader = reader
        self._recv_object = reader.fast_recv_object() if local_reader_rank >= 0 else None
        self._finalizer = None
        self._is_writer = False
        self._is_local_reader = local_reader_rank >= 0
        self._is_remote_reader = local_reader_rank < 0
        self.local_reader_rank = local_reader_rank
        self.n_reader = handle.n_reader
        self.n_local_reader = len(handle.local_reader_ranks)
        self.n_remote_reader = n_remote_reader
        self.max_chunk_bytes = handle.max_chunk_bytes
        self.max_chunks = handle.max_chunks
        self._oob_threshold = OOB_THRESHOLD
        self._max_parts = _core.MAX_PARTS
        self.handle = handle
        self._burst_lock = threading.Lock()
        self._burst_left = []  # the binding's recv_many appends to this very list: it is never replaced
        return self

    def wait_until_ready(self, timeout: Optional[float] = None) -> None:
        """The handshake. Writer: waits until every local reader rank has attached and every remote
        reader has connected (said hello over ZeroMQ). Local reader: checks the writer lives. Remote
        reader: waits for the publisher's welcome.

        Args:
            timeout: seconds to wait (writer and remote reader); None (default) waits forever, 0
                checks once. The GIL is released while waiting. A local reader does not wait.

        Raises:
            TimeoutError: the timeout passed; the message lists the local ranks that never attached
                or the remote ranks that never connected (writer), or names the publisher's endpoint
                that never answered (remote reader).
            PeerDeadError: reader: the writer process is gone.
            ClosedError: this queue was shut down.
            ValueError: a negative timeout.
        """
        _check_timeout(timeout)
        if self._is_writer:
            start = time.monotonic()
            try:
                self._writer.wait_readers(timeout)
            except TimeoutError:
                # The binding knows local indices only: the message names the ranks readers attach as,
                # and the remote ranks not connected yet, so that one error lists everything missing.
                local = [self.handle.local_reader_ranks[i] for i in self._writer.missing_readers()]
                remote = self._publisher.missing_ranks() if self._publisher is not None else []
                missing = f"reader rank(s) {', '.join(map(str, local))} never attached"
                if remote:
                    missing += f"; remote reader rank(s) {', '.join(map(str, remote))} not connected yet"
                raise TimeoutError(f"wait_until_ready timed out after {timeout:g} s: {missing}") from None
            if self._publisher is not None:
                self._publisher.wait_ready(None if timeout is None else max(0.0, timeout - (time.monotonic() - start)))
        elif self._is_remote_reader:
            self._reader.wait_ready(timeout)
        else:
            self._reader.check_writer_alive()

    # ---- objects -------------------------------------------------------------------------------
    def _device_pickler_factory(self) -> Callable[..., pickle.Pickler]:
        """What makes the pickler of every message while a GPU array library is loaded:
        ``factory(file, protocol=5, buffer_callback=cb)`` -> a pickle.Pickler whose reducer_override
        turns device arrays into references the reader resolves (ringcast._gpu._DevicePickler). A
        subclass with a _pickle of its own (ringcast.vllm) returns one that does what its _pickle does
        as well. Asked once, in MessageQueue.__init__ when the writer is made (before a subclass's own
        __init__ body runs: it may use what the base class set); the binding keeps it, so it must not
        refer to the queue (a cycle through the binding's writer, which the garbage collector does not
        see, would keep the queue alive). Until 2026-12-03 the override point was
        ``_device_pickler(file, buffer_callback)``, which is no longer called."""
        return _gpu._DevicePickler

    def _dumps(self, obj: Any) -> list:
        return dumps_out_of_band(obj, self._oob_threshold, self._max_parts - 1, self._pickle)

    # How the pickle itself is made (ringcast.vllm overrides it: CPU tensors as one buffer each). The
    # one override point for serialization: enqueue/dequeue's hot path does not go through _dumps or
    # _loads (one frame less a call), so overriding those would change only some paths.
    _pickle = staticmethod(pickle5)
    # A device message a timed-out dequeue left half received (ringcast._gpu sets and clears it).
    _gpu_pending: Any = None
    # The ringcast.aio call in progress on this queue's endpoint (aio._Claim), None when none: the
    # blocking calls refuse to run beside it (aio.refuse_blocking_call), one attribute look per call.
    _aio_call: Any = None

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
        """Sends ``obj`` to every reader.

        Pickles ``obj`` (protocol 5; buffers of at least oob_threshold bytes out of band) and copies
        it into the ring; any size works, a large message streams through the ring in records.
        Returns at once while the ring has room; otherwise blocks, GIL released, until the slowest
        reader frees space. A send interrupted half way (timeout, Ctrl-C, shutdown) is withdrawn:
        readers never see a torn message.

        Args:
            obj: any picklable object.
            timeout: seconds; None (default) waits forever, 0 only takes free space.

        Raises:
            TimeoutError: the slowest reader did not free space in time.
            ClosedError: the queue was shut down (also wakes a call blocked in another thread).
            PeerDeadError: a reader the writer waits for died (names its rank index, its rank from
                local_reader_ranks and its pid; within two liveness intervals).
            RingcastError: called inside an acquire_write() block of this queue.
            RuntimeError: called on a reader, or while another thread uses this queue.
            ValueError: a negative timeout.
            pickle.PicklingError, TypeError, AttributeError: what pickle raises for an object
                it cannot pickle (nothing is sent).
        """
        # The hot path of every step: checks inlined, then one binding call that pickles and copies —
        # with torch (or another GPU array library) loaded as well, as in every inference engine: the
        # binding then pickles with the device pickler and returns a message holding CUDA arrays
        # unsent, for the GPU path (DMA, docs/gpu.md).
        if not self._is_writer:
            self._require_writer("enqueue")
        if timeout is True or timeout is False:  # the binding would take a bool as 1.0 / 0.0 seconds
            _check_timeout(timeout)
        if self._aio_call is not None:  # an enqueue_async's message is pending in the writer
            _aio_refuse(self, self._writer, "enqueue")
        if self._send_object is not None:
            try:
                device_message = self._send_object(obj, timeout)
            except TypeError as e:
                raise_in_callers_terms(e, "send_object", timeout=timeout)
            if device_message is not None:
                data, oob, pickler = device_message
                _gpu.send_device_message(self, data, oob, pickler, timeout)
            return None
        if _gpu.may_hold_device_arrays():  # a _pickle of its own: the device pickling in Python
            if self._wake_ahead:  # readers asleep wake while the message is pickled
                self._writer.wake_ahead()
            return _gpu.enqueue(self, obj, timeout)
        if self._wake_ahead:
            self._writer.wake_ahead()
        self._writer.send(dumps_out_of_band(obj, self._oob_threshold, self._max_parts - 1, self._pickle), timeout)

    def dequeue(self, timeout: Optional[float] = None, indefinite: bool = False, device: Any = None) -> Any:
        """Receives the next object (blocks, GIL released, until one is there).

        The returned object owns its memory (numpy arrays are writable and independent of the ring).

        Args:
            timeout: seconds; None (default) waits forever, 0 only takes a message already there.
            indefinite: accepted for vLLM compatibility; ignored (no periodic warnings here).
            device: where CUDA arrays the writer sent are rebuilt (int, 'cuda:N' or torch.device;
                None: the current CUDA device). See docs/gpu.md.

        Returns:
            The object the writer enqueued. A bytes/bytearray/memoryview sent as the message comes
            back as bytes (read-only memory) or bytearray (writable), at any size (docs/python.md,
            "Bytes-like messages").

        Raises:
            TimeoutError: no message arrived in time.
            ClosedError: the writer shut the queue down and every message has been read, or this
                reader was shut down (also wakes a call blocked in another thread).
            PeerDeadError: the writer died (names its pid; within two liveness intervals). What it
                published before dying is still delivered first.
            RingcastError: the next message was written with acquire_write() (read it with
                acquire_read()).
            SegmentError: the ring holds corrupt data (a record or message not as ringcast wrote it).
            RuntimeError: called on the writer, or while another thread uses this queue.
            ValueError: a negative timeout.
        """
        if self._is_writer:
            self._require_reader("dequeue")
        if timeout is True or timeout is False:  # the binding would take a bool as 1.0 / 0.0 seconds
            _check_timeout(timeout)
        if self._aio_call is not None:  # a dequeue_async waits on this reader
            _aio_refuse(self, self._reader, "dequeue")
        if self._gpu_pending is not None:  # a device message a timed-out dequeue left half received
            return _gpu.resume(self, timeout)
        if self._burst_left:  # what a dequeue_many took and left for the next read
            return self._take_burst_left(1, timeout, device, "dequeue")[0]
        if self._is_local_reader:  # one binding call: waits, copies out, unpickles
            try:
                obj = self._recv_object(timeout)
            except TypeError as e:
                raise_in_callers_terms(e, "recv_object", timeout=timeout)
            if type(obj) is not _core.MultipartMessage:
                return obj
            parts = obj.parts
        else:
            parts = self._reader.recv(timeout)
            if len(parts) == 1:  # one pickle, no out-of-band buffers, no device arrays
                return pickle.loads(parts[0])
        if _gpu.is_device_message(parts):
            return _gpu.receive(self, parts, timeout, device)
        return self._loads(parts)

    def dequeue_many(self, max_n: int, timeout: Optional[float] = None) -> List[Any]:
        """Receives a burst: waits for one object, then takes every further one that is ready.

        One GIL acquisition per burst, not per message. Stops before a message written with
        acquire_write() and before a close (the next call reports it).

        Args:
            max_n: the most objects to return (>= 1).
            timeout: seconds to wait for the first object; None (default) forever, 0 poll.

        Returns:
            list: 1..max_n objects, in order.

        Raises:
            TimeoutError, ClosedError, PeerDeadError, RingcastError, RuntimeError: as dequeue()
                (for the first object). An error after the first object (a dead writer, a corrupt
                record) ends the burst: what was taken is returned, the next call raises it.
            Exception: what unpickling the first object raised (it is consumed, as by dequeue()).
                A later object that fails to unpickle ends the burst before it; the next read
                raises its error. Nothing of a burst is lost: what a call took and did not return
                comes first in the next read.
            RuntimeError: also while this call runs (its burst unpickled included) or another
                read serves what it left, to a call of another thread and to unpickled code that
                reads this queue: one thread at a time, as every reader call; none is served twice.
            TypeError, ValueError: max_n not an int in 1..2**64-1, a negative timeout.
        """
        if self._is_writer:
            self._require_reader("dequeue_many")
        # The common call (an int max_n in range, no timeout or a float / int one >= 0) passes the
        # checks as it is; only another goes through them (their errors, a numpy integer made an int).
        if not (type(max_n) is int and 0 < max_n < 2**64
                and (timeout is None or (type(timeout) is float or type(timeout) is int) and timeout >= 0)):
            max_n = _check_int("max_n", max_n, 1, 2**64 - 1)
            _check_timeout(timeout)
        if self._aio_call is not None:
            _aio_refuse(self, self._reader, "dequeue_many")
        if self._gpu_pending is not None:
            return [_gpu.resume(self, timeout)]
        lock = self._burst_lock
        if not lock.acquire(False):
            self._refuse_second_thread("dequeue_many")
        try:  # held from the ring call on: a second thread cannot take this burst
            left = self._burst_left
            if not left:
                # The binding appends each message to _burst_left as it takes it off the ring: an
                # exception landing as the call returns (a KeyboardInterrupt) leaves the burst there.
                if self._reader.recv_many(left, max_n, timeout) == 1 and len(left[0][1]) == 1:
                    return [self._loads_one_of_a_burst(left)]  # one message, one pickle: most calls
            return self._serve_burst_left(max_n, timeout, None, "dequeue_many")
        finally:
            lock.release()

    def broadcast_object(self, obj: Any = None) -> Any:
        """vLLM's broadcast: the writer sends ``obj`` and returns it; a reader returns the next object.

        Waits without a timeout (GIL released), so it never raises TimeoutError: use enqueue() /
        dequeue() with ``timeout`` for a bounded wait.

        Args:
            obj: writer: the object to send; ignored on a reader.

        Returns:
            Writer: ``obj``. Reader: the received object.

        Raises:
            ClosedError, PeerDeadError, RuntimeError: as enqueue() on the writer, dequeue() on a
                reader.
        """
        if self._is_writer:
            self.enqueue(obj)
            return obj
        return self.dequeue()

    # ---- asyncio (ringcast/aio.py; docs/events.md) ----------------------------------------------
    def dequeue_async(self, timeout: Optional[float] = None) -> Coroutine[Any, Any, Any]:
        """Awaitable dequeue(): ``obj = await mq.dequeue_async(timeout=None)`` on a running asyncio loop
        (default or uvloop), without a thread and without blocking the loop.

        The loop watches this reader's eventfd; a large message is taken record by record as they
        arrive. A cancelled await took nothing: records of a large message it had consumed stay
        assembled in the reader and the next dequeue returns that message (nothing lost or
        duplicated). One coroutine at a time per queue.

        Args:
            timeout: seconds; None (default) waits forever, 0 only takes a message already there.

        Returns:
            The next object, as dequeue().

        Raises:
            TimeoutError, ClosedError, PeerDeadError, RingcastError, ValueError: as dequeue().
            PermissionError: the writer cannot take this reader's eventfd (docs/events.md).
            RuntimeError: called on the writer or on a remote reader, or while another dequeue_async
                of this reader is in progress.
        """
        from ringcast import aio  # asyncio is imported only by code that awaits
        return aio.dequeue(self, timeout)

    def enqueue_async(self, obj: Any, timeout: Optional[float] = None) -> Coroutine[Any, Any, None]:
        """Awaitable enqueue(): ``await mq.enqueue_async(obj)`` waits for ring space on the running
        asyncio loop (the writer's eventfd), without a thread and without blocking the loop.

        A large message is published record by record as readers make room. Cancelled, timed out
        or failed before its last record is out, the message is withdrawn: no reader gets any of it.
        Do not change ``obj``'s buffers until the await returns. One coroutine at a time per queue
        (enqueue() and another enqueue_async raise RuntimeError meanwhile). CUDA arrays are pickled
        like any object here (no DMA; enqueue() moves them by DMA, docs/gpu.md).

        Args:
            obj: any picklable object.
            timeout: seconds; None (default) waits forever, 0 only takes free space.

        Raises:
            TimeoutError, ClosedError, PeerDeadError, ValueError: as enqueue().
            PermissionError: a reader cannot take this writer's eventfd (docs/events.md).
            RuntimeError: called on a reader, or while another enqueue of this queue is pending.
        """
        from ringcast import aio
        return aio.enqueue(self, obj, timeout)

    # ---- raw chunks (zero-copy) ---------------------------------------------------------------
    @contextmanager
    def acquire_write(self, timeout: Optional[float] = None, size: Optional[int] = None) -> Iterator[memoryview]:
        """Context manager: a writable memoryview of ``size`` bytes inside the ring (zero copy).

        Write into the view inside the ``with`` block; the chunk is published to every reader when
        the block exits normally and dropped if it raises. Readers take it with acquire_read()
        (dequeue() refuses it). The view, and every view derived from it (slices, ``memoryview(v)``,
        casts, ``numpy.frombuffer(v)``), must not outlive the block: one still referenced when the
        block ends raises RingcastError there (see Raises).

        Args:
            timeout: seconds to wait for ring space; None (default) forever, 0 poll.
            size: bytes (default max_chunk_bytes), at most the ring's largest record
                (capacity/4 - 16).

        Yields:
            memoryview: writable, ``size`` bytes.

        Raises:
            TimeoutError: no space in time.
            ClosedError, PeerDeadError: as enqueue().
            ValueError: ``size`` is negative or exceeds the largest record; a negative timeout.
            TypeError: ``size`` that is not an int, a timeout that is not a number.
            RingcastError: a view of the chunk outlived the block — any view derived from the
                yielded one (a slice, ``memoryview(v)``, a cast, ``numpy.frombuffer(v)``) still
                referenced when the block ends. The chunk is then withdrawn, not published, and
                every later write of this queue raises RingcastError until that view is released
                (``del`` it or call its ``release()``): its bytes are free ring space the next
                message would reuse. Also raised by a write while such a view is alive.
            RuntimeError: called on a reader, or while another thread uses this queue.
        """
        self._require_writer("acquire_write")
        _check_timeout(timeout)
        if size is None:
            size = self.max_chunk_bytes
        elif isinstance(size, bool) or not isinstance(size, numbers.Integral):  # numpy's ints too
            raise TypeError(f"acquire_write: size must be an int, got {type(size).__name__}")
        elif size < 0:
            raise ValueError(f"acquire_write: size must be >= 0, got {size}")
        try:
            buf = self._writer.reserve_raw(int(size), timeout)
        except TypeError as e:  # the binding takes a size_t: a larger size is refused there
            if str(e).startswith("reserve_raw(): incompatible function arguments") and size > self._writer.max_reserve:
                raise ValueError(f"acquire_write: size must be at most {self._writer.max_reserve} (the ring's largest "
                                 f"record: capacity/4 - 16), got {size}") from None
            raise
        ok = False
        try:
            yield buf
            ok = True
        finally:
            try:
                buf.release()
            except BufferError:
                pass  # something holds a buffer of `buf` itself: commit_raw sees the chunk still viewed
            # The view shows an exporter that counts every view derived from it (slices, memoryview(),
            # casts, numpy.frombuffer): with one still alive, commit_raw drops the chunk instead of
            # publishing it and raises RingcastError; this writer then refuses to write until that
            # view is gone (its bytes are free ring space).
            end_block(lambda: self._writer.commit_raw(publish=ok), ok)

    @contextmanager
    def acquire_read(self, timeout: Optional[float] = None, indefinite: bool = False) -> Iterator[memoryview]:
        """Context manager: a read-only memoryview of the next acquire_write() chunk (zero copy).

        The view is valid only inside the ``with`` block; the chunk is consumed when it exits. A view
        derived from it (a slice, ``memoryview(v)``, a cast, ``numpy.frombuffer(v)``) still referenced
        when the block ends raises RingcastError there: the chunk is then kept, not consumed, so that
        the writer cannot overwrite the bytes under that view, and every later read of this queue
        raises RingcastError until the view is released (``del`` it or call its ``release()``); the
        first read after that consumes the chunk and goes on. Copy what you keep (``bytes(v[...])``).

        Args:
            timeout: seconds; None (default) waits forever, 0 poll.
            indefinite: accepted for vLLM compatibility; ignored.

        Yields:
            memoryview: read-only, the bytes the writer published.

        Raises:
            TimeoutError: no message arrived in time.
            RingcastError: the next message was sent with enqueue() (it is left for dequeue()), or
                one is partly received; a view of the chunk outlived the block (see above); an
                acquire_read() block of this queue is open, its view alive; messages a
                dequeue_many() took are still to be read; a device message is partly received.
            ClosedError, PeerDeadError, RuntimeError, ValueError: as dequeue().
        """
        self._require_reader("acquire_read")
        _check_timeout(timeout)
        if self._aio_call is not None:
            _aio_refuse(self, self._reader, "acquire_read")
        self._refuse_raw_read_while_objects_wait()
        buf = self._reader.peek_raw(timeout)
        ok = False
        try:
            yield buf
            ok = True
        finally:
            try:
                buf.release()
            except BufferError:
                pass  # something holds a buffer of `buf` itself: release_raw sees the chunk still viewed
            # With a view derived from `buf` still alive, release_raw keeps the chunk (the writer cannot
            # overwrite the bytes under that view) and raises RingcastError; later reads raise it too
            # until that view is gone.
            end_block(self._reader.release_raw, ok)

    # ---- end -----------------------------------------------------------------------------------
    def shutdown(self) -> None:
        """Closes this end; idempotent, callable from any thread.

        Writer: readers drain what was sent, then get ClosedError; the /dev/shm name is removed at
        once (done too when the writer is garbage-collected). Without remote readers it returns at
        once; with them it first hands the last messages to the remote readers, waiting up to 30 s
        for slow ones (docs/remote.md). While an enqueue of another thread is in progress, the queue
        is closed when that enqueue leaves (woken, or at its next record, it stops): a message not
        yet fully out is withdrawn (that enqueue raises ClosedError) and reaches no reader; one
        already out is read by every reader first. Reader: later calls raise ClosedError;
        its rank is released at once (the writer, or for a remote reader the publisher, stops
        waiting for it) — or, while a call of another thread is in progress, as that call leaves;
        an acquire_read() chunk still open keeps it until its with-block ends. A chunk of a device
        message kept for a retry after its copy to the device failed is given back here (or, while
        another thread's copy reads it, as that copy ends). A call blocked in another thread wakes
        with ClosedError.
        """
        if self._is_writer:
            if self._finalizer is not None:
                self._finalizer()  # shuts the writer down, then drains and stops the remote publisher
            else:
                self._writer.shutdown()
        else:
            self._reader.shutdown()
            _gpu.release_held_chunk(self)  # a chunk a failed device copy kept for a retry (always: a
            # device message another thread is receiving may not be pending yet: _gpu's chunk lock)

    @property
    def name(self) -> str:
        """The queue's /dev/shm name (``handle.name``)."""
        return self.handle.name

    def __reduce__(self) -> Any:
        # Passed to a spawned process (or pickled): the endpoint is this process's. Said in these terms
        # instead of pickle's "cannot pickle 'ringcast._core.Writer' object".
        raise TypeError("a MessageQueue cannot be pickled or passed to another process: pass its "
                        "export_handle() and call MessageQueue.create_from_handle(handle, rank) there")

    def __repr__(self) -> str:
        role = "writer" if self._is_writer else (
            "remote reader" if self._is_remote_reader else f"reader {self.local_reader_rank}")
        return f"<ringcast.MessageQueue {self.handle.name!r} {role}, {self.n_local_reader} local readers>"
