"""ReplyGather: replies from N worker ranks, collected by the executor with one wait.

Each worker rank owns a one-reader reply ring; one shared doorbell line wakes the executor (or one
futex_waitv over the rings' own futex words, ``method="futex_waitv"``). ``collect(tag, ranks)`` waits
once for the whole set — one GIL release — and drains replies in whatever order they arrive. Every
reply carries the request's tag: a reply with another tag raises ``StaleReplyError`` (naming the rank
and both tags) instead of being mistaken for the answer to the new request.
"""

from __future__ import annotations

import os
import pickle
import uuid
from dataclasses import dataclass
from typing import Any, Iterable, List, Optional, Union

from ringcast import _core
from ringcast._queue import check_handle_version


@dataclass(frozen=True)
class GatherHandle:
    """What a worker process needs to attach its rank; picklable."""

    name: str
    n_ranks: int
    wait: str
    liveness_interval: float
    spin_us: float = 10.0
    abi_version: int = -1  # set by export_handle; another version's handle is refused
    spin_max_us: float = 0.0


def _ranks_list(ranks: Union[None, int, Iterable[int]], n: int) -> List[int]:
    if ranks is None:
        return list(range(n))
    if isinstance(ranks, int) and not isinstance(ranks, bool):
        ranks = [ranks]
    out = []
    for r in ranks:
        if isinstance(r, bool) or not isinstance(r, int):
            raise TypeError(f"ranks must be None, an int or a list of ints, got {type(r).__name__}")
        if not 0 <= r < n:
            raise ValueError(f"rank {r} out of range: the group has ranks 0..{n - 1}")
        out.append(r)
    return out


class ReplyGather:
    """The executor creates it (``ReplyGather(n_ranks)``) and sends ``export_handle()`` to the workers;
    each worker calls ``ReplyGather.create_from_handle(handle, rank)`` and ``reply(tag, obj)``; the
    executor calls ``collect(tag, ranks=None | int | list, timeout=None)``.

    Options: ``max_reply_bytes`` sizes each reply ring (larger replies still work, in fragments);
    ``method`` 'doorbell' (default) or 'futex_waitv' (at most 128 ranks); ``wait`` 'hybrid' (default),
    'futex', 'spin' or 'spin_yield'; ``spin_us`` how long hybrid spins before sleeping; ``spin_max_us``
    above spin_us makes that spin adaptive (MessageQueue's docstring says how), applied to both sides;
    ``liveness_interval`` seconds between dead-worker checks.
    """

    def __init__(self, n_ranks: int, *, max_reply_bytes: int = 1 << 18, method: str = "doorbell",
                 wait: str = "hybrid", spin_us: float = 10.0, spin_max_us: float = 0.0,
                 liveness_interval: float = 1.0, name: Optional[str] = None,
                 mode: int = 0o600):
        if isinstance(n_ranks, bool) or not isinstance(n_ranks, int) or n_ranks < 1:
            raise ValueError(f"n_ranks must be an int >= 1, got {n_ranks!r}")
        capacity = max(4 * (max_reply_bytes + 64), _core.MIN_CAPACITY)
        capacity = 1 << (capacity - 1).bit_length()
        self.name = name or f"rcg-{os.getpid()}-{uuid.uuid4().hex[:12]}"
        self.n_ranks = n_ranks
        self._wait = wait
        self._liveness = liveness_interval
        self._spin_us = spin_us
        self._spin_max_us = spin_max_us
        self._collector = _core.GatherCollector(self.name, n_ranks, capacity, mode, method, wait,
                                                spin_us=spin_us, spin_max_us=spin_max_us,
                                                liveness_s=liveness_interval)
        self._worker = None
        self.rank = None

    def export_handle(self) -> GatherHandle:
        if self._collector is None:
            raise RuntimeError("export_handle: only the executor side (the constructor's) has a handle")
        return GatherHandle(self.name, self.n_ranks, self._wait, self._liveness, self._spin_us, _core.ABI_VERSION,
                            self._spin_max_us)

    @staticmethod
    def create_from_handle(handle: GatherHandle, rank: int) -> "ReplyGather":
        if not isinstance(handle, GatherHandle):
            raise ValueError(f"not a ReplyGather handle: {type(handle).__name__}")
        check_handle_version(handle)
        if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < handle.n_ranks:
            raise ValueError(f"rank {rank!r} out of range: the group has ranks 0..{handle.n_ranks - 1}")
        self = ReplyGather.__new__(ReplyGather)
        self.name, self.n_ranks, self._wait, self._liveness = handle.name, handle.n_ranks, handle.wait, handle.liveness_interval
        self._spin_us = handle.spin_us
        self._spin_max_us = vars(handle).get("spin_max_us", 0.0)
        self._collector = None
        self._worker = _core.GatherWorker(handle.name, rank, handle.wait, spin_us=handle.spin_us,
                                          spin_max_us=self._spin_max_us,
                                          liveness_s=handle.liveness_interval)
        self.rank = rank
        return self

    # ---- worker side ----------------------------------------------------------------------------
    def reply(self, tag: int, obj: Any, timeout: Optional[float] = None) -> None:
        """Sends `obj` as this rank's reply to request `tag` (blocks, GIL released, only if the
        executor has not collected this rank's earlier replies and its ring is full)."""
        if self._worker is None:
            raise RuntimeError("reply: only a worker (create_from_handle) replies")
        self._worker.reply(tag, pickle.dumps(obj, protocol=5), timeout)

    # ---- executor side --------------------------------------------------------------------------
    def collect(self, tag: int, ranks: Union[None, int, Iterable[int]] = None,
                timeout: Optional[float] = None) -> List[Any]:
        """The replies to request `tag` from `ranks` (None: all; an int: that output rank only), as a
        list in the order of `ranks`. One wait for the whole set. Raises TimeoutError naming the ranks
        that did not answer, StaleReplyError for a reply with another tag, PeerDeadError for a dead
        worker, ClosedError if a pending worker closed or the gather was shut down."""
        if self._collector is None:
            raise RuntimeError("collect: only the executor side (the constructor's) collects")
        wanted = _ranks_list(ranks, self.n_ranks)
        return [pickle.loads(b) for b in self._collector.collect(tag, wanted, timeout)]

    def collect_async(self, tag: int, ranks: Union[None, int, Iterable[int]] = None,
                      timeout: Optional[float] = None) -> "PendingReplies":
        """Starts collect(tag, ranks, timeout) and returns at once, for an executor that prepares the next
        step meanwhile — instead of a Python thread blocked in collect(). No thread is needed: the
        replies land in each rank's reply ring whether or not anyone waits. ``done()`` looks without
        waiting; ``result()`` returns what collect() would have returned (or raises what it would have
        raised), and when the replies are in by then it costs no wait, no thread wake-up and no GIL
        hand-off; otherwise it waits once, GIL released, for the rest. Replies larger than a reply
        ring buffers (~4 x max_reply_bytes) hold their worker until result(). One pending collect per
        ReplyGather: take result() before the next collect or collect_async. The timeout runs from
        this call."""
        if self._collector is None:
            raise RuntimeError("collect_async: only the executor side (the constructor's) collects")
        wanted = _ranks_list(ranks, self.n_ranks)
        self._collector.collect_start(tag, wanted, timeout)
        return PendingReplies(self._collector, tag)

    @property
    def kernel_waits(self) -> int:
        return self._collector.kernel_waits if self._collector is not None else 0

    def close(self) -> None:
        """Worker: close this rank's reply ring (a pending collect sees it). Executor: shut down (a
        collect blocked in another thread raises ClosedError)."""
        if self._worker is not None:
            self._worker.close()
        if self._collector is not None:
            self._collector.shutdown()

    shutdown = close

    def __repr__(self) -> str:
        side = "executor" if self._collector is not None else f"worker rank {self.rank}"
        return f"ReplyGather(name={self.name!r}, n_ranks={self.n_ranks}, {side})"


class PendingReplies:
    """A collect started by ReplyGather.collect_async()."""

    __slots__ = ("_collector", "tag", "_taken")

    def __init__(self, collector, tag: int):
        self._collector = collector
        self.tag = tag
        self._taken = False

    def done(self) -> bool:
        """True once every reply is in (or the collect failed): result() will not wait."""
        return not self._taken and self._collector.collect_done()

    def result(self) -> List[Any]:
        """The replies in the order of the ranks asked for; waits (GIL released) if they are not all in."""
        if self._taken:
            raise RuntimeError(f"result() of collect(tag={self.tag}) was already taken")
        try:
            parts = self._collector.collect_result()  # raises TimeoutError / StaleReplyError / ... as collect()
        except KeyboardInterrupt:
            raise  # still pending: result() may be called again
        except BaseException:
            self._taken = True  # the collect ended with this error
            raise
        self._taken = True
        return [pickle.loads(b) for b in parts]

    def __repr__(self) -> str:
        return f"<PendingReplies tag={self.tag} {'taken' if self._taken else 'done' if self.done() else 'pending'}>"
