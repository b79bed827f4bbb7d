"""ReplyGather, GatherHandle, PendingReplies: replies from N worker ranks, collected with one wait.

Each worker rank owns a one-reader reply ring; one shared doorbell line wakes the executor (or one
futex_waitv over the rings' own futex words, ``method="futex_waitv"``). ``collect(tag, ranks)`` waits
once for the whole set — one GIL release — and drains replies in whatever order they arrive. Every
reply carries the request's tag: a reply with another tag raises ``StaleReplyError`` (naming the rank
and both tags) instead of being mistaken for the answer to the new request.

Ranks on other machines (``remote_ranks``, ZeroMQ) reply to a bridge thread in the executor's process that
writes each reply into that rank's reply ring, so the same one collect covers them (docs/remote.md).
"""

from __future__ import annotations

import numbers
import os
import pickle
import re
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Generator, Iterable, List, Optional, Tuple, Union, cast

from ringcast import _core
from ringcast._core import SegmentError
from ringcast._args import (MAX_CAPACITY, _aio_refuse, _check_int, _check_timeout, check_endpoint_types,
                            check_handle_version, check_tag, raise_in_callers_terms, require_remote, retold)
from ringcast._sweep import GENERATED_PREFIX, sweep_generated_names

# A collect's cap on the adaptive spin: 10 ms, 5x a C++ reader's 2 ms (C++'s kCollectSpinMax;
# gather.hpp says why: a collect waits for a step in flight, a reader perhaps for one that never comes).
DEFAULT_COLLECT_SPIN_MAX_US = _core.COLLECT_SPIN_MAX_US
# A worker's cap: its only wait is for room in its reply ring (a writer's wait), capped as C++'s
# GatherWorker caps it (WaitOptions' default, 2 ms).
WORKER_SPIN_MAX_US = _core.SPIN_MAX_US
# The default reply size a reply ring holds in one record: its ring is then exactly 1 MiB (4 x (it + 64)).
# 256 KiB made every ring 2 MiB (4 x (256 KiB + 64) is just over 1 MiB: the power of two above is 2 MiB),
# half of it never needed, and at 24 ranks the rings beside the queue's 16 MiB filled all of Docker's
# default 64 MiB /dev/shm. Larger replies still pass, in fragments.
DEFAULT_MAX_REPLY_BYTES = (1 << 18) - 64


@dataclass(frozen=True)
class GatherHandle:
    """What a worker process needs to attach its rank of a ReplyGather; picklable.

    Get it from the executor's ``ReplyGather.export_handle()`` and attach with
    ``ReplyGather.create_from_handle(handle, rank)``. A handle from another ringcast version is
    refused with ValueError.

    Attributes:
        name: the gather's name (its reply rings are ``<name>.r<rank>``, its doorbell ``<name>.bell``).
        n_ranks: worker ranks 0..n_ranks-1.
        wait: the workers' wait strategy ('hybrid', 'futex', 'spin', 'spin_yield').
        liveness_interval: seconds between a blocked worker's checks that the executor lives.
        spin_us: hybrid: microseconds a worker spins before sleeping.
        abi_version: the ringcast ABI of the exporting process (-1 in a handle built by hand).
        spin_max_us: hybrid: the executor's cap on its adaptive spin; a worker caps its own (a wait for
            room in its reply ring) at the lesser of this and a writer's 2 ms (WORKER_SPIN_MAX_US).
        remote_ranks: the ranks that reply from other machines over ZeroMQ (empty without).
        remote_reply_addr: the executor's reply bridge endpoint ("tcp://IP:PORT", the real port) the
            remote ranks connect to; None without remote ranks.
        remote_curve_public_key: the bridge's CURVE public key ("" without CURVE).
        creation_time_ns: when the gather's rank-0 reply ring was made: tells a stale handle from a
            gather re-created under the same name (0: not checked, a handle built by hand).
    """

    name: str
    n_ranks: int
    wait: str
    liveness_interval: float
    spin_us: float = 10.0
    abi_version: int = -1  # set by export_handle; another version's handle is refused
    spin_max_us: float = DEFAULT_COLLECT_SPIN_MAX_US
    remote_ranks: Tuple[int, ...] = ()
    remote_reply_addr: Optional[str] = None
    remote_curve_public_key: str = ""
    creation_time_ns: int = 0


def _ring0_created(name: str) -> Optional[int]:
    """When the gather's rank-0 reply ring was made; None if it does not exist. SegmentError if it is
    there but not readable as a ringcast segment (PermissionError if another user's)."""
    try:
        return int(_core.segment_info(f"{name}.r0")["creation_time_ns"])
    except SegmentError as e:  # there, but not ringcast's as it is: corrupt or foreign, not stale
        raise retold(e, f"cannot attach to gather '{name}': {e}") from None
    except ValueError as e:  # none of that name (PermissionError goes up: another user's gather is not stale)
        if str(e).startswith("segment name "):  # no gather could have it: not stale, a bad handle
            raise ValueError(f"cannot attach to gather {name!r}: its name is not a valid segment name ({e}), so "
                             "no executor made it: use the handle its executor's export_handle() returned") from None
        return None


def _refuse_bool(tag: Any, timeout: Any) -> None:
    """TypeError for a bool tag or timeout, which the binding would take as 1 / 0 (MessageQueue refuses
    a bool timeout the same way). The hot paths call it only when one is a bool (an identity test)."""
    if tag is True or tag is False:
        raise TypeError(f"tag must be an int, got {type(tag).__name__}")
    _check_timeout(timeout)


def _ranks_list(ranks: Union[None, int, Iterable[int]], n: int) -> List[int]:
    """The ranks asked for, checked: None is every rank, an empty iterable none. Any integer type
    counts (numpy's too); bools do not."""
    if ranks is None:
        return list(range(n))
    # The hot path (a collect that names its ranks): a plain int, or a list or tuple of plain ints in
    # range, checked by exact type. The general checks below cost ~0.4 us a rank (1.1 us for [0, 1],
    # against 0.26 us here, on the 2-core VM) — on a sync step, time spent after the request went out
    # and before the collect's wait yields the CPU to a worker that may share it.
    if type(ranks) is int:
        if 0 <= ranks < n:
            return [ranks]
    elif type(ranks) is list or type(ranks) is tuple:
        for r in ranks:
            if type(r) is not int or not 0 <= r < n:
                break
        else:
            return list(ranks)
    # A single rank (a bool too: refused below with the others) or an iterable of them.
    if isinstance(ranks, numbers.Integral):
        asked: Iterable[Any] = [ranks]
    else:
        try:
            asked = iter(cast(Iterable[Any], ranks))
        except TypeError:  # (a 0-d numpy array is neither)
            raise TypeError(f"ranks must be None, an int or a list of ints, got {type(ranks).__name__}") from None
    out = []
    for r in asked:
        if isinstance(r, bool) or not isinstance(r, numbers.Integral):
            raise TypeError(f"ranks must be None, an int or a list of ints, got {type(r).__name__}")
        rank = int(r)
        if not 0 <= rank < n:
            raise ValueError(f"rank {rank} out of range: the group has ranks 0..{n - 1}")
        out.append(rank)
    return out


class ReplyGather:
    """Replies from N worker ranks to one executor, collected with one wait for all ranks.

    The executor creates it (``ReplyGather(n_ranks)``) and sends ``export_handle()`` to the workers;
    each worker calls ``ReplyGather.create_from_handle(handle, rank)`` and answers each request with
    ``reply(tag, obj)``; the executor calls ``collect(tag, ranks)`` (or ``collect_async``).

    Tags: the executor picks a tag per request (an int, 0..2**64-1, e.g. a step counter), sends it
    with the request (e.g. through a MessageQueue), and each worker replies with it. Use a new tag
    for every request: a reply carrying another tag (a late answer to an earlier request) raises
    StaleReplyError, never passes for the answer to this one.

    One wait for all ranks: collect() drains whatever replies are there, in any order, then waits
    once (GIL released) until any pending rank answers, instead of one wait per rank.

    Args:
        n_ranks: worker ranks 0..n_ranks-1 (1..1024).
        max_reply_bytes: sizes each rank's reply ring (the next power of two >= 4 x (max_reply_bytes
            + 64), at least 64 KiB); larger replies still work, in fragments. Default 256 KiB - 64: a
            1 MiB ring per rank.
        method: how the executor sleeps: 'doorbell' (default; one shared doorbell line) or
            'futex_waitv' (one futex_waitv over every pending ring; at most 128 ranks).
        wait: 'hybrid' (default: spin spin_us, then sleep), 'futex', 'spin' or 'spin_yield', as
            MessageQueue; applied to both sides (travels in the handle).
        spin_us: hybrid: microseconds to spin before sleeping (default 10).
        spin_max_us: hybrid: above spin_us the spin is adaptive (MessageQueue's docstring says
            how). Default 10000 (10 ms: a collect spins through steps of up to ~10 ms instead of
            sleeping through them, as a worker's receive does past 5 ms, 2 where CPUs are shared;
            docs/python.md says why);
            0 turns it off. The workers get it in the handle and cap their own spin (a wait for room
            in a reply ring) at the lesser of it and 2 ms.
        liveness_interval: seconds between dead-peer checks while blocked (default 1.0, > 0): a dead
            worker (or executor) raises PeerDeadError within two intervals.
        name: base name of the /dev/shm objects (default: a unique one).
        mode: permission bits of the /dev/shm objects (default 0o600, owner only); a group mode
            such as 0o660 lets the group attach; world-writable is refused.
        sweep_abandoned: as MessageQueue's: first remove abandoned ``ringcast-py-*`` objects
            (one warning line if any). Default True.
        remote_ranks: ranks whose workers run on other machines (keyword-only; default none). They
            reply over ZeroMQ to a bridge thread of this process, which writes each reply into the
            rank's reply ring: collect() is the same one wait over local and remote ranks, with the
            same tags, timeouts and StaleReplyError. Needs ``connect_ip``. A remote worker attaches
            with ``create_from_handle(handle, rank)`` from any machine that reaches
            ``handle.remote_reply_addr``. See docs/remote.md.
        connect_ip: with remote ranks: the literal IPv4/IPv6 address of this machine's interface the
            remote workers reach; the bridge binds there only (hostnames and '*' are refused;
            '0.0.0.0' / '::' must be asked for). remote_port: 0 (default) picks an ephemeral port,
            reported in the handle. curve_secret_key: CURVE encryption (docs/remote.md); the handle
            carries the public key.

    Raises:
        TypeError: n_ranks, max_reply_bytes, mode or remote_port not an int.
        ValueError: n_ranks not in 1..1024, max_reply_bytes not in 0..2**38-64, mode not in
            0..0o777, remote_port not in 0..65535, an unknown method or wait, a negative,
            non-finite or too long spin, liveness_interval not in (0, 1 day], futex_waitv with more than 128 ranks, a bad or used name, a
            world-writable mode; remote ranks out of range, repeated or without connect_ip, a
            connect_ip that is not a literal address, an empty name or one too long for its derived
            names (<name>.bell, <name>.r<rank>).
        OSError: remote_port in use (errno EADDRINUSE).
        ImportError: remote ranks in a ringcast built without ZeroMQ (``_core.HAVE_REMOTE``).
        PermissionError, MemoryError, OSError: /dev/shm refused the objects (as MessageQueue).

    Clean exit: a worker that closes (or is garbage-collected) closes its reply ring, and a collect
    waiting for that rank raises ClosedError naming it; an executor that exits cleanly releases the
    reply rings, so workers replying after it never block. One thread at a time per ReplyGather (a
    second thread's concurrent call raises RuntimeError).

    Remote ranks: a remote worker killed (its connection drops) makes a collect waiting for it raise
    PeerDeadError naming the rank, within about liveness_interval / 5 (the bridge's heartbeat) once
    the other ranks it waits for have answered (at the timeout: TimeoutError naming it); a
    remote host that vanishes without a TCP reset is dropped after about 10 s (TCP keepalive and user
    timeout), with the same PeerDeadError. A remote worker that closes cleanly raises ClosedError
    there, as a local one. A remote worker's reply() raises PeerDeadError when the executor was
    silent for liveness_interval.
    """

    # The executor side has _collector (and _bridge with remote ranks); a local worker _worker, a
    # remote worker _remote (and rank); the others are None.
    _collector: Any
    _worker: Any
    # The step's calls without pybind11's dispatcher (FastEntry objects, made once: _queue.py says why).
    _collect_objects: Any = None  # the executor's GatherCollector.collect_objects
    _collect_start: Any = None  # ... collect_start, collect_is and collect_result_objects (collect_async)
    _collect_is: Any = None
    _collect_result_objects: Any = None
    _reply_object: Any = None  # a local worker's GatherWorker.reply_object
    _bridge: Any
    _remote: Any
    rank: Optional[int]
    # The ringcast.aio collect in progress on this gather (aio._Claim), None when none (MessageQueue's).
    _aio_call: Any = None
    # close() was called (executor): wait_until_ready's look for unattached local ranks stops there.
    _closed: bool = False

    def __init__(self, n_ranks: int, *, max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES, method: str = "doorbell",
                 wait: str = "hybrid", spin_us: float = 10.0, spin_max_us: float = DEFAULT_COLLECT_SPIN_MAX_US,
                 liveness_interval: float = 1.0, name: Optional[str] = None,
                 mode: int = 0o600, sweep_abandoned: bool = True,
                 remote_ranks: Optional[Iterable[int]] = None, connect_ip: Optional[str] = None,
                 remote_port: int = 0, curve_secret_key: Optional[str] = None):
        given: Any = n_ranks  # (typed int, which mypy does not count among numbers.Integral)
        if isinstance(given, bool) or not isinstance(given, numbers.Integral):
            raise TypeError(f"n_ranks must be an int, got {type(given).__name__}")
        n_ranks = int(given)  # numpy's integers too; the handle carries a plain int
        if n_ranks < 1:
            raise ValueError(f"n_ranks must be an int >= 1, got {n_ranks!r}")
        if n_ranks > _core.MAX_READERS:  # the binding takes a uint32, the core at most MAX_READERS
            raise ValueError(f"n_ranks must be at most {_core.MAX_READERS} (a gather's worker ranks), got {n_ranks}")
        # The binding takes the sizes as uint64 and the mode as uint32: out of range, it would refuse
        # them in its own terms ("incompatible function arguments"), and a negative or fractional size
        # would pass unnoticed.
        check_endpoint_types(name, wait, spin_us, spin_max_us, liveness_interval, spin_max_us_may_be_none=False,
                             method=method)
        max_reply_bytes = _check_int("max_reply_bytes", max_reply_bytes, 0, MAX_CAPACITY // 4 - 64,
                   "4 x (max_reply_bytes + 64) sizes a reply ring, at most 1 TiB")
        mode = _check_int("mode", mode, 0, 0o777, "permission bits, 0o777")
        remote = _ranks_list([] if remote_ranks is None else remote_ranks, n_ranks)
        if len(set(remote)) != len(remote):
            raise ValueError(f"remote_ranks has duplicates: {remote}")
        if remote:
            require_remote(f"remote ranks {remote}", connect_ip, "the remote workers", "the reply bridge")
            _check_int("remote_port", remote_port, 0, 65535)
        if sweep_abandoned:
            sweep_generated_names()
        capacity = max(4 * (max_reply_bytes + 64), _core.MIN_CAPACITY)
        capacity = 1 << (capacity - 1).bit_length()
        self.name = name if name is not None else f"{GENERATED_PREFIX}g-{os.getpid()}-{uuid.uuid4().hex[:12]}"
        self.n_ranks = n_ranks
        self._wait = wait
        self._liveness = liveness_interval
        self._spin_us = spin_us
        self._spin_max_us = spin_max_us
        self._collector = _core.GatherCollector(self.name, n_ranks, capacity, mode, method, wait,
                                                spin_us=spin_us, spin_max_us=spin_max_us,
                                                liveness_s=liveness_interval)
        self._collect_objects = self._collector.fast_collect_objects()
        self._collect_start = self._collector.fast_collect_start()
        self._collect_is = self._collector.fast_collect_is()
        self._collect_result_objects = self._collector.fast_collect_result_objects()
        try:
            self._created = _ring0_created(self.name) or 0
        except BaseException:  # its own rank-0 ring overwritten already: nothing is left half made
            self._collector.shutdown()
            self._collector.remove_names()  # (what the destructor would remove, later)
            raise
        self._bridge = None
        if remote:
            try:
                # The bridge becomes the writer of the remote ranks' reply rings (a thread of this
                # process): replies arriving over ZeroMQ land where a local worker's would.
                self._bridge = _core.RemoteReplyBridge(self.name, connect_ip or "", remote_port, remote,
                                                       heartbeat_s=liveness_interval / 5,
                                                       curve_secret_key=curve_secret_key or "")
            except BaseException:  # (a port in use, an address not here): nothing is left in /dev/shm,
                self._collector.shutdown()  # even while the exception, holding this frame, is alive — a
                self._collector.remove_names()  # retry of the same name in its except block is not refused
                raise
        self.remote_ranks = remote
        self._worker = None
        self._remote = None
        self.rank = None

    def export_handle(self) -> GatherHandle:
        """The handle the workers attach with (executor side).

        Returns:
            GatherHandle: picklable; pass it with a rank to ``ReplyGather.create_from_handle``.

        Raises:
            RuntimeError: called on a worker.
        """
        if self._collector is None:
            raise RuntimeError("export_handle: only the executor side (the constructor's) has a handle")
        bridge = self._bridge
        return GatherHandle(self.name, self.n_ranks, self._wait, self._liveness, self._spin_us, _core.ABI_VERSION,
                            self._spin_max_us, tuple(self.remote_ranks), bridge.endpoint if bridge else None,
                            bridge.curve_public_key if bridge else "", self._created)

    @staticmethod
    def create_from_handle(handle: GatherHandle, rank: int, *, remote_addr: Optional[str] = None) -> "ReplyGather":
        """Attaches this process as worker ``rank``.

        A rank whose previous worker is gone (its ReplyGather garbage-collected, or its process
        dead) may be attached again, e.g. by a restarted worker. A rank in ``handle.remote_ranks``
        attaches over ZeroMQ (no shared memory: any machine that reaches the executor); call
        wait_until_ready() next.

        Args:
            handle: the executor's ``export_handle()``.
            rank: 0..handle.n_ranks-1 (an int; numpy's integers too).
            remote_addr: remote ranks: the bridge endpoint to connect to, when this machine reaches
                the executor by another address than ``handle.remote_reply_addr`` (default).

        Returns:
            ReplyGather: the worker side (reply, close).

        Raises:
            ValueError: not a GatherHandle, a handle from another ringcast version, a rank out of
                range, a rank already attached by a live process, or a gather that does not exist
                (any more).
            SegmentError: (a ValueError too) the gather's rings are there but not ringcast segments
                this library can use: another program's objects, another version's, overwritten.
            TypeError: a rank that is not an int.
            PermissionError: the gather belongs to another user (mode 0o600).
            ImportError: a remote rank in a ringcast built without ZeroMQ.
        """
        if not isinstance(handle, GatherHandle):
            raise ValueError(f"not a ReplyGather handle: {type(handle).__name__}")
        check_handle_version(handle)
        # 0.0 == 0 would attach rank 0; numpy's ints are ints (as MessageQueue.create_from_handle takes them)
        if isinstance(rank, bool) or not isinstance(rank, numbers.Integral):
            raise TypeError(f"rank must be an int, got {type(rank).__name__}")
        rank = int(rank)
        if not 0 <= rank < handle.n_ranks:
            raise ValueError(f"rank {rank!r} out of range: the group has ranks 0..{handle.n_ranks - 1}")
        exported = vars(handle).get("creation_time_ns", 0)  # 0: a handle without it (built by hand, older)
        if exported and rank not in getattr(handle, "remote_ranks", ()):
            created = _ring0_created(handle.name)
            if created is None:
                raise ValueError(f"stale handle: gather '{handle.name}' does not exist any more (its executor "
                                 "closed it or exited)")
            if created != exported:
                raise ValueError(f"stale handle: gather '{handle.name}' was re-created after this handle was "
                                 "exported")
        self = ReplyGather.__new__(ReplyGather)
        self.name, self.n_ranks, self._wait, self._liveness = handle.name, handle.n_ranks, handle.wait, handle.liveness_interval
        self._spin_us = handle.spin_us
        # A worker waits only for room in its reply ring, i.e. for the executor to collect: the
        # collect's longer cap is for a step in flight (gather.hpp, kCollectSpinMax), and a worker that
        # spun up to 10 ms for a busy executor would burn a core for what a wake-up serves. C++'s
        # GatherWorker defaults to a writer's WaitOptions (2 ms) the same way.
        self._spin_max_us = min(vars(handle).get("spin_max_us", DEFAULT_COLLECT_SPIN_MAX_US), WORKER_SPIN_MAX_US)
        self._collector = None
        self._bridge = None
        self.remote_ranks = list(getattr(handle, "remote_ranks", ()))
        self._worker = None
        self._remote = None
        if rank in self.remote_ranks:
            if not getattr(_core, "HAVE_REMOTE", False):
                raise ImportError(f"rank {rank} is a remote worker, but this ringcast was built without ZeroMQ")
            self._remote = _core.RemoteGatherWorker(remote_addr or handle.remote_reply_addr or "", rank,
                                                    liveness_s=handle.liveness_interval,
                                                    curve_server_key=getattr(handle, "remote_curve_public_key", ""))
        else:
            try:
                self._worker = _core.GatherWorker(handle.name, rank, handle.wait, spin_us=handle.spin_us,
                                                  spin_max_us=self._spin_max_us,
                                                  liveness_s=handle.liveness_interval)
                self._reply_object = self._worker.fast_reply_object()
            except ValueError as e:
                # The core names the rank's reply ring ("segment 'g.r0' already has a live writer"): said
                # in the gather's words, the rank's worker.
                held = re.search(r"already has a live writer \(pid (\d+)\)", str(e))
                if held is None:
                    raise
                raise retold(e, f"cannot attach rank {rank} to gather '{handle.name}': rank {rank} already has "
                                f"a live worker (pid {held.group(1)}); one worker per rank — a replacement "
                                "attaches once that process has exited or its worker ReplyGather is gone (deleted "
                                "or garbage-collected: close() alone keeps the rank)") from None
        self.rank = rank
        return self

    def wait_until_ready(self, timeout: Optional[float] = None) -> None:
        """The start-up handshake: every worker is there.

        Executor: waits until every remote rank has connected, then until every local rank's worker
        has attached (ReplyGather.create_from_handle) — a worker that failed before it attached would
        otherwise be waited for by every collect (forever with the default timeout). A worker that
        attached and has since closed or died counts as attached (collect reports it). Remote worker:
        waits for the bridge's welcome. Local worker: returns at once.

        Args:
            timeout: seconds, for the whole wait; None (default) waits forever. The GIL is released
                while waiting (local ranks: looked at every few ms).

        Raises:
            TimeoutError: names the remote ranks that never connected or the local ranks whose worker
                never attached (executor), or says the bridge never answered (remote worker).
            PeerDeadError: remote worker: the executor was silent for liveness_interval.
            ClosedError: executor: the gather was closed (before this call, or from another thread
                while it waits); with remote ranks, a bridge stopped before they all connected names
                those that did not.
            ValueError: remote worker: another live process holds this rank (the first one keeps it).
        """
        _check_timeout(timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        local = [r for r in range(self.n_ranks) if r not in self.remote_ranks]
        if self._bridge is not None:
            try:
                self._bridge.wait_ready(timeout)
            except TimeoutError as e:  # the local ranks still missing too: one timeout names every cause
                missing = self._collector.never_attached(local) if local and not self._closed else []
                if not missing:
                    raise
                raise TimeoutError(f"{e}; local worker rank(s) {', '.join(map(str, missing))} did not attach to "
                                   f"gather '{self.name}' either (ReplyGather.create_from_handle(handle, rank) was "
                                   "not called for them, or failed)") from None
        elif self._remote is not None:
            self._remote.wait_ready(timeout)
        if self._collector is None:
            return
        pause = 0.001
        while True:
            if self._closed:  # close() here or in another thread: every later call raises ClosedError
                raise _core.ClosedError(f"wait_until_ready: gather '{self.name}' was closed")
            missing = self._collector.never_attached(local) if local else []
            if not missing:
                return
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"local worker rank(s) {', '.join(map(str, missing))} did not attach to gather "
                                   f"'{self.name}' within {timeout} s (ReplyGather.create_from_handle(handle, "
                                   "rank) was not called for them, or failed)")
            time.sleep(pause if deadline is None else max(0.0, min(pause, deadline - time.monotonic())))
            pause = min(pause * 2, 0.02)

    # ---- worker side ----------------------------------------------------------------------------
    def reply(self, tag: int, obj: Any, timeout: Optional[float] = None) -> None:
        """Sends ``obj`` (pickled) as this rank's reply to request ``tag`` (worker side).

        Returns at once while the rank's reply ring has room; blocks, GIL released, only if the
        executor has not collected this rank's earlier replies and the ring is full (a reply larger
        than the ring streams through it while the executor collects).

        Args:
            tag: the request's tag (int, 0..2**64-1).
            obj: any picklable object.
            timeout: seconds; None (default) waits forever, 0 only takes free space.

        A remote worker's reply() returns once ZeroMQ queued it. It waits (GIL released) for the
        executor's welcome, and while 16 of its replies are not yet in its reply ring on the executor's
        machine (the bridge's credit: a collector that does not collect holds up this worker only).

        Raises:
            TimeoutError: the ring stayed full (remote: the ZeroMQ queue).
            ClosedError: this worker was closed.
            PeerDeadError: the executor died while this worker waited for ring space (within two
                liveness intervals); remote: the executor was silent for liveness_interval.
            RuntimeError: called on the executor, or while another thread uses this worker.
            ValueError: a negative timeout, a tag outside 0..2**64-1. TypeError: a tag that is not
                an int (a bool is not), a timeout that is not a number (nor a bool).
        """
        # The binding would take a bool as 1 / 0: True is no tag 1, no "1 second" (an identity test per call).
        if tag is True or tag is False or timeout is True or timeout is False:
            _refuse_bool(tag, timeout)
        if self._remote is not None:
            # The local path's rule (a FastEntry's): an integer in range, not any number; the remote
            # call is a network send, where this check costs nothing that counts.
            self._remote.reply(check_tag(tag), pickle.dumps(obj, protocol=5), timeout)
            return
        if self._worker is None:
            raise RuntimeError("reply: only a worker (create_from_handle) replies")
        try:
            self._reply_object(tag, obj, timeout)  # pickles and copies in one call
        except TypeError as e:
            raise_in_callers_terms(e, "reply_object", tag=tag, timeout=timeout)

    # ---- executor side --------------------------------------------------------------------------
    def collect(self, tag: int, ranks: Union[None, int, Iterable[int]] = None,
                timeout: Optional[float] = None) -> List[Any]:
        """The replies to request ``tag`` from ``ranks`` (executor side).

        Takes the replies that are there, in any order, then waits once for the rest — one wait
        (GIL released) for all ranks, not one per rank. A reply that comes while others are still
        awaited is unpickled then, between waits (not in a collect with timeout 0); those that end
        the collect are unpickled after the wait, before collect returns.

        Args:
            tag: the request's tag.
            ranks: None (default: every rank), an int (that rank only) or an iterable of ranks (an
                empty one: no rank, [] at once).
            timeout: seconds; None (default) waits forever, 0 only takes what is there.

        Returns:
            list: the unpickled replies, in the order of ``ranks`` (a rank given twice: its reply
            in both places, unpickled for each).

        Raises:
            TimeoutError: the timeout passed; names the ranks that did not answer. The replies it
                took are kept: a retry, collect() of the same tag, returns them and waits only for
                the rest; a collect of another tag drops them (and a reply that arrives for the
                abandoned tag later raises StaleReplyError there).
            StaleReplyError: a rank replied with another tag (names the rank and both tags). That
                reply leaves the ring and is kept for a collect of its own tag (up to 4 a rank); the
                good replies this collect took before it are kept for the next collect of the same
                tag (a collect of another tag drops them).
            PeerDeadError: a pending worker died (names its rank and pid; within two liveness
                intervals); a pending remote worker's connection dropped (names the rank).
            ClosedError: a pending worker closed its reply ring (names the ranks), or the gather
                was shut down (also wakes a collect blocked in another thread). After a worker's
                closed ring the replies it took are kept as after a timeout: a worker restarted in
                that rank's place may answer the same tag, and collect() of it returns them with
                the new one.
            RuntimeError: called on a worker, while a collect_async is pending, while another
                thread uses this gather, or from the unpickling of an early reply of this gather.
            Exception: what unpickling a reply raised (the first in the order of ``ranks``), once
                every reply is in; the replies are consumed.
            ValueError: a rank out of range, a negative timeout, a tag outside 0..2**64-1.
            TypeError: a rank or tag that is not an int (a bool is not), a timeout that is not a
                number (nor a bool).
        """
        if self._collector is None:
            raise RuntimeError("collect: only the executor side (the constructor's) collects")
        # One binding call that waits, copies and unpickles; None asks for every rank, [] for none.
        if tag is True or tag is False or timeout is True or timeout is False:
            _refuse_bool(tag, timeout)
        wanted = None if ranks is None else _ranks_list(ranks, self.n_ranks)
        if self._aio_call is not None:  # an aio collect waits on this gather
            _aio_refuse(self, self._collector, "collect")
        return self._collect_now(tag, wanted, timeout)

    def _collect_now(self, tag: int, wanted: Optional[List[int]], timeout: Optional[float]) -> List[Any]:
        """collect() once its arguments are checked (ringcast.aio's polls come here directly)."""
        try:
            return self._collect_objects(tag, wanted, timeout)
        except TypeError as e:
            raise_in_callers_terms(e, "collect_objects", tag=tag, timeout=timeout)
        except _core.ClosedError as e:
            self._raise_if_remote_lost(e, list(range(self.n_ranks)) if wanted is None else wanted)
            raise

    def _raise_if_remote_lost(self, err: BaseException, wanted: List[int]) -> None:
        # The bridge lists a rank in lost_ranks() BEFORE it closes the rank's reply ring, so a collect
        # that returned `closed` because of a dropped connection finds the rank here.
        if self._bridge is None:
            return
        lost = sorted(set(self._bridge.lost_ranks()) & set(wanted))
        if lost:
            raise _core.PeerDeadError(
                f"remote worker rank(s) {', '.join(map(str, lost))} of '{self.name}': the connection to the reply "
                f"bridge at {self._bridge.endpoint} dropped (the worker process died or its host is unreachable); "
                f"{err}") from err

    def collect_async(self, tag: int, ranks: Union[None, int, Iterable[int]] = None,
                      timeout: Optional[float] = None) -> "PendingReplies":
        """Starts collect(tag, ranks, timeout) and returns at once (executor side).

        For an executor that prepares the next step meanwhile, instead of a Python thread blocked in
        collect(). No thread is needed: the replies land in each rank's reply ring whether or not
        anyone waits. ``PendingReplies.done()`` looks without waiting; ``PendingReplies.result()``
        returns what collect() would have returned (or raises what it would have raised), and when
        the replies are in by then it costs no wait, no thread wake-up and no GIL hand-off;
        otherwise it waits once, GIL released, for the rest. Replies larger than a reply ring
        buffers (~4 x max_reply_bytes) hold their worker until result(). One pending collect per
        ReplyGather: take result() before the next collect or collect_async.

        Args:
            tag, ranks: as collect().
            timeout: as collect(), but it runs from this call; a TimeoutError (like every other
                error of the collect) is raised by result().

        Returns:
            PendingReplies: the started collect; awaitable on an asyncio loop
            (``replies = await gather.collect_async(tag)``, docs/events.md).

        Raises:
            RuntimeError: called on a worker, or a collect is already pending.
            ClosedError: the gather was shut down.
            ValueError, TypeError: a bad rank or timeout (at once, not from result()).
        """
        if self._collector is None:
            raise RuntimeError("collect_async: only the executor side (the constructor's) collects")
        if tag is True or tag is False or timeout is True or timeout is False:
            _refuse_bool(tag, timeout)
        wanted = _ranks_list(ranks, self.n_ranks)
        if self._aio_call is not None:
            _aio_refuse(self, self._collector, "collect_async")
        before = self._collector.last_collect_id
        try:
            collect_id = self._collect_start(tag, wanted, timeout, True)  # result(): collect_result_objects()
            return PendingReplies(self._collector, tag, (self._collect_is, self._collect_result_objects),
                                  lambda e: self._raise_if_remote_lost(e, wanted), self._liveness, collect_id)
        except TypeError as e:
            raise_in_callers_terms(e, "collect_start", tag=tag, timeout=timeout)
        except BaseException:
            # A signal handler's exception (KeyboardInterrupt) raised as collect_start returned, before
            # a PendingReplies held its collect: nobody could end it, and every later collect was
            # refused as "already pending". Given up as a dropped PendingReplies is (its replies stay
            # for the next collect of the tag) — only a collect this call began.
            started = self._collector.last_collect_id
            if started != before:
                self._collector.collect_abandon(started)
            raise

    @property
    def spin_max_us(self) -> float:
        """This side's cap on its adaptive spin in µs (hybrid): the constructor's ``spin_max_us`` on the
        executor (default 10 ms), on a worker the lesser of that and a writer's 2 ms (what its reply
        ring's writer got), 0 on a remote rank (its replies go over ZeroMQ: it never spins)."""
        if self._worker is not None:
            return float(self._worker.spin_max_us)
        return 0.0 if self._remote is not None else self._spin_max_us

    @property
    def kernel_waits(self) -> int:
        """How many times the executor's collects slept in the kernel (0 on a worker)."""
        return self._collector.kernel_waits if self._collector is not None else 0

    def close(self) -> None:
        """Closes this side; ``shutdown`` is the same method.

        Worker: closes this rank's reply ring: a collect waiting for the rank raises ClosedError
        naming it; later reply() calls raise ClosedError. Once this object is garbage-collected a
        new worker may attach the rank.
        Executor: shuts down: a collect blocked in another thread, and every later call, raises
        ClosedError; the group's /dev/shm objects are removed now, as MessageQueue.shutdown()
        removes its name (a worker attaching later finds no group). The
        reply bridge (remote ranks) stops: remote workers' later replies get PeerDeadError after
        their liveness interval.
        Remote worker: says bye: a collect waiting for the rank raises ClosedError naming it.
        """
        if self._worker is not None:
            self._worker.close()
        if self._remote is not None:
            self._remote.close()
        if self._collector is not None:
            self._closed = True  # a wait_until_ready in another thread stops at its next look
        # The collector's shutdown first (a collect blocked in another thread hears that the gather
        # closed), then the bridge, then the names: a replacement remote worker's hello, served by the
        # bridge until it stops, attaches its reply ring by name.
        if self._collector is not None:
            self._collector.shutdown()
        if self._bridge is not None:
            self._bridge.stop()
        if self._collector is not None:
            self._collector.remove_names()

    shutdown = close

    def __reduce__(self) -> Any:
        # As MessageQueue's: the endpoint is this process's; the handle travels.
        raise TypeError("a ReplyGather cannot be pickled or passed to another process: pass its "
                        "export_handle() and call ReplyGather.create_from_handle(handle, rank) there")

    def __repr__(self) -> str:
        side = ("executor" if self._collector is not None else
                f"remote worker rank {self.rank}" if self._remote is not None else f"worker rank {self.rank}")
        return f"ReplyGather(name={self.name!r}, n_ranks={self.n_ranks}, {side})"


class PendingReplies:
    """A collect started by ReplyGather.collect_async(); take its outcome with result().

    Attributes:
        tag: the request's tag.
    """

    __slots__ = {"_collector": None, "tag": "The request's tag this collect waits for.", "_taken": None,
                 "_on_closed": None, "_liveness": None, "_id": None, "_closed_by": None, "_aio_call": None,
                 "_is_pending": None, "_take_result": None}

    def __init__(self, collector, tag: int, entries: Tuple[Callable[[int], bool], Callable[[], List[Any]]],
                 on_closed: Optional[Callable[[BaseException], None]] = None, liveness: float = 1.0,
                 collect_id: int = 0):
        self._collector = collector
        # The collector's collect_is and collect_result_objects without pybind11's dispatcher: the
        # gather's FastEntry objects, made once with the gather.
        self._is_pending, self._take_result = entries
        self._id = collect_id  # collect_start's number: this object acts on its own collect only
        self.tag = tag
        self._taken = False
        self._closed_by: Optional[BaseException] = None  # the ClosedError (or PeerDeadError) that ended it
        self._on_closed = on_closed  # raises PeerDeadError instead when a remote rank's connection dropped
        self._liveness = liveness  # seconds between dead-worker checks of an await on a loop (aio)
        self._aio_call: Any = None  # an await of this collect in progress on a loop (aio._Claim)

    def __del__(self) -> None:
        # Dropped without result(): the gather must not stay blocked by a collect nobody can finish
        # (every later collect would raise RuntimeError). The replies it took stay with the gather for
        # the next collect of the tag, as after a timeout.
        if not getattr(self, "_taken", True):
            try:
                self._collector.collect_abandon(self._id)  # only its own collect
            except Exception:  # noqa: BLE001 — a finalizer does not raise (the gather may be gone)
                pass

    def done(self) -> bool:
        """True once result() will not wait: every reply is in, or the collect failed or timed out.

        Never waits; the collect's errors are raised by result(). It unpickles the replies that came
        while others are awaited, so what that unpickling raises at once (KeyboardInterrupt, a signal
        handler's exception) comes out of done(). False after result() was taken.
        """
        return not self._taken and self._mine() and self._collector.collect_done()

    def _mine(self) -> bool:
        """Whether the gather's pending collect is still this one (another collect_async may have
        begun since this one ended). No side effect: while result() waits, the binding holds the
        collect outside the gather, so a look from a signal handler (repr) or from another thread
        sees False then, and must not mark it taken."""
        return self._is_pending(self._id)

    def result(self) -> List[Any]:
        """The replies, in the order of the ranks asked for; waits (GIL released) for missing ones.

        Returns:
            list: what collect() would have returned.

        Raises:
            TimeoutError: the timeout given to collect_async() passed (names the missing ranks).
            StaleReplyError, PeerDeadError, ClosedError: as collect().
            RuntimeError: result() was already taken. After KeyboardInterrupt the collect is still
                pending and result() may be called again. A collect that a closed gather or ring
                ended raises that error again, not this: the cause stays the one named.
        """
        if self._aio_call is not None:  # an await of it waits on the loop (and would miss its wake)
            _aio_refuse(self, self._collector, "result()")
        return self._result()

    def _result(self) -> List[Any]:
        """result() past its check of an await in progress (ringcast.aio's own await ends here)."""
        if self._closed_by is not None:
            raise type(self._closed_by)(str(self._closed_by))
        if self._taken or not self._mine():
            self._taken = True
            raise RuntimeError(f"result() of collect(tag={self.tag}) was already taken")
        try:
            replies = self._take_result()  # raises TimeoutError / StaleReplyError / ... as collect()
        except KeyboardInterrupt:
            # Still pending (the binding puts the collect back, also when the interrupt came while the
            # last replies were unpickled): result() may be called again.
            self._taken = not self._is_pending(self._id)
            raise
        except _core.ClosedError as e:
            # Ended: a ClosedError (a worker's closed ring, or a closed gather) ends the collect — also
            # when the call was refused before it took the collect (a shut-down gather's check), which
            # then stays in the gather; an await loop reads _taken, not only _mine(), so it stops too.
            self._taken = True
            self._closed_by = e
            if self._on_closed is not None:
                try:
                    self._on_closed(e)
                except _core.PeerDeadError as lost:  # a remote rank's dropped connection: that is the cause
                    self._closed_by = lost
                    raise
            raise
        except BaseException:
            # Ended with this error — unless the call was refused before taking it (another thread in
            # the endpoint, a call from a reply's unpickling): then it is still pending, and ours.
            self._taken = not self._is_pending(self._id)
            raise
        self._taken = True
        return replies

    def __await__(self) -> Generator[Any, None, List[Any]]:
        """``replies = await gather.collect_async(tag, ranks, timeout)``: waits on the running asyncio
        loop (default or uvloop) through the collector's eventfd, no thread, then returns result().

        The collect's own timeout applies (TimeoutError, as result()). A cancelled await leaves the
        collect pending with the replies it has: await it again, or call result().
        """
        from ringcast import aio  # asyncio is imported only by code that awaits
        return aio.await_pending(self)

    def __repr__(self) -> str:
        if self._closed_by is not None:
            return f"<PendingReplies tag={self.tag} closed>"
        if self._taken or not self._mine():
            return f"<PendingReplies tag={self.tag} taken>"
        return f"<PendingReplies tag={self.tag} {'done' if self.done() else 'pending'}>"
