"""asyncio awaitables for ringcast: the running loop watches each endpoint's eventfd; no thread per queue.

    import ringcast.aio as aio
    obj = await aio.dequeue(mq, timeout=None)           # a MessageQueue reader
    await aio.enqueue(mq, obj, timeout=None)            # a MessageQueue writer, waiting for space
    replies = await aio.collect(gather, tag, ranks)     # a ReplyGather collector

How a wait goes (docs/events.md): take what is there with a zero timeout; if nothing, ``arm`` the
endpoint (drain its eventfd, announce the wait, re-check: the same handshake as a blocking wait, so a
message published at any moment is either seen by the re-check or signals the fd); if still nothing,
``loop.add_reader(fd)`` and await a future the callback completes; then ``disarm`` and take again.
The loop never blocks: every core call here returns at once (GIL held briefly).

Cancellation: a cancelled await consumed nothing. Taking a message is one non-blocking core call that
either returns a whole message or nothing (a message that arrived only in part stays assembled in the
reader for the next call), and it only runs while the task is not being cancelled; the wait itself
consumes nothing. So the next dequeue gets the next message: nothing lost, nothing duplicated.
Works on the default loop and on uvloop (any loop with add_reader).

One coroutine at a time per endpoint (the endpoints' one-thread rule). Messages too large for one
record of the ring (``max_chunk_bytes``) are enqueued by a blocking enqueue in the loop's default
executor (a pool thread for that message only): a fragmented message cannot be published without
waiting for readers between its fragments.
"""
import asyncio
import os
import weakref
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Optional, Tuple, Union

from . import _core

if TYPE_CHECKING:
    from ._gather import ReplyGather
    from ._queue import MessageQueue

_Endpoint = Union[_core.Reader, _core.Writer, _core.GatherCollector]

__all__ = ["dequeue", "enqueue", "collect"]


class _Watch:
    """One endpoint's eventfd, registered once with one loop (add_reader costs an epoll_ctl and a
    Handle: not per wait). The callback drains the fd and completes the waiting future, if any.
    Draining here is safe: the waiter looks again (disarm, arm = drain + announce + re-check) after
    every wake, so a signal eaten here is never a message left unseen (docs/events.md)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, fd: int) -> None:
        self.loop = loop
        self.fd = fd
        self.fut: "Optional[asyncio.Future[None]]" = None
        loop.add_reader(fd, self._readable)

    def _readable(self) -> None:
        try:
            os.read(self.fd, 8)
        except BlockingIOError:
            pass
        if self.fut is not None and not self.fut.done():
            self.fut.set_result(None)

    def close(self) -> None:
        if not self.loop.is_closed():
            self.loop.remove_reader(self.fd)


_Table = Dict[asyncio.AbstractEventLoop, _Watch]
_watches: "weakref.WeakKeyDictionary[Any, _Table]" = weakref.WeakKeyDictionary()  # owner -> {loop: _Watch}


def _drop_watches(table: _Table) -> None:
    for w in list(table.values()):
        w.close()


def _watch(owner: Any, endpoint: _Endpoint) -> _Watch:
    """The _Watch of `endpoint` (owned by `owner`: a MessageQueue or ReplyGather) for the running loop."""
    loop = asyncio.get_running_loop()
    table = _watches.get(owner)
    if table is None:
        table = {}
        _watches[owner] = table
        weakref.finalize(owner, _drop_watches, table)  # the fd goes with the endpoint
    for other in [lp for lp in table if lp.is_closed()]:
        del table[other]
    w = table.get(loop)
    if w is None:
        w = table[loop] = _Watch(loop, _core.wake_fd(endpoint))
    return w


async def _wait_fd(owner: Any, endpoint: _Endpoint, arm_args: Tuple[Any, ...], deadline: Optional[float]) -> bool:
    """Returns once it is worth looking again: True if arm() found it ready at once, False after the fd
    turned readable or the deadline passed."""
    w = _watch(owner, endpoint)
    if _core.arm(endpoint, *arm_args):
        return True  # ready now; nothing armed
    loop = w.loop
    fut = w.fut = loop.create_future()
    timer = loop.call_at(deadline, w._readable) if deadline is not None else None
    try:
        await fut
    finally:  # also on cancellation: the announcement is withdrawn, nothing was taken
        w.fut = None
        if timer is not None:
            timer.cancel()
        _core.disarm(endpoint)
    return False


def _deadline(timeout: Optional[float]) -> Optional[float]:
    if timeout is None:
        return None
    if timeout < 0:
        raise ValueError(f"timeout must be >= 0 or None, got {timeout}")
    return asyncio.get_running_loop().time() + timeout


def _expired(deadline: Optional[float]) -> bool:
    return deadline is not None and asyncio.get_running_loop().time() >= deadline


async def dequeue(mq: "MessageQueue", timeout: Optional[float] = None) -> Any:
    """Awaits the next object of a MessageQueue reader (as ``mq.dequeue``, without blocking the loop).

    Raises TimeoutError after ``timeout`` seconds (None: wait forever), ClosedError, PeerDeadError, and
    everything ``mq.dequeue`` raises; PermissionError if the writer cannot take the eventfd.
    """
    deadline = _deadline(timeout)
    reader = mq._reader
    if reader is None:
        raise RuntimeError("dequeue: this MessageQueue is the writer")
    while True:
        if await _wait_fd(mq, reader, (), deadline):  # ready: a record (or the close) is there
            try:
                return mq.dequeue(timeout=0)
            except TimeoutError:  # a message that has only begun to arrive: wait for the rest
                pass
        if _expired(deadline):
            return mq.dequeue(timeout=0)  # TimeoutError unless it came at the very end


async def enqueue(mq: "MessageQueue", obj: Any, timeout: Optional[float] = None) -> None:
    """Awaits room in the ring and enqueues ``obj`` on a MessageQueue writer (as ``mq.enqueue``)."""
    deadline = _deadline(timeout)
    writer = mq._writer
    if writer is None:
        raise RuntimeError("enqueue: this MessageQueue is a reader")
    # Room for the largest record: over-waiting for a small message is safe (readers drain), and a
    # wait that says "room" and then fails to write cannot spin.
    room = (_core.max_record_payload(writer.capacity),)
    failed_with_room = 0
    while True:
        try:
            mq.enqueue(obj, timeout=0)
            return
        except TimeoutError:
            if _expired(deadline):
                raise
        if failed_with_room >= 2:  # larger than a record: fragments need waits between them
            left = None if deadline is None else max(0.0, deadline - asyncio.get_running_loop().time())
            await asyncio.get_running_loop().run_in_executor(None, lambda: mq.enqueue(obj, timeout=left))
            return
        if await _wait_fd(mq, writer, room, deadline):
            failed_with_room += 1  # arm() said "room" at once, yet the write failed


async def collect(gather: "ReplyGather", tag: int, ranks: Optional[Iterable[int]] = None,
                  timeout: Optional[float] = None) -> List[Any]:
    """Awaits the replies to ``tag`` on a ReplyGather collector (as ``gather.collect``).

    Replies already taken stay with the gather between looks (its collect keeps them), so a cancelled
    or timed-out await loses none: the next collect of the tag returns them.
    """
    deadline = _deadline(timeout)
    core = gather._collector
    if core is None:
        raise RuntimeError("collect: this ReplyGather is a worker")
    wanted = None if ranks is None else list(ranks)
    while True:
        try:
            return gather.collect(tag, wanted, timeout=0)
        except TimeoutError:
            if _expired(deadline):
                raise
        await _wait_fd(gather, core, (wanted,), deadline)
