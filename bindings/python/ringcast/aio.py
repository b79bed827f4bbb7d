"""asyncio awaitables for ringcast: the running loop watches each endpoint's eventfd; no thread per queue.

    obj = await mq.dequeue_async(timeout=None)          # a MessageQueue reader
    await mq.enqueue_async(obj, timeout=None)           # a MessageQueue writer, waiting for space
    replies = await gather.collect_async(tag, ranks)    # a ReplyGather collector (PendingReplies)

The methods are these functions (``aio.dequeue(mq)``, ``aio.enqueue(mq, obj)``, ``aio.collect(gather,
tag)`` are the same calls). How a wait goes (docs/events.md): take what is there without waiting; if
nothing, ``arm`` the endpoint (drain its eventfd, announce the wait, re-check: the same handshake as a
blocking wait, so a message published at any moment is either seen by the re-check or signals the
fd); if still nothing, await a future that the fd's reader callback completes (the fd is watched by
the loop from before the arm until a signal comes while no wait of this module is pending: that one
is left to the endpoint's blocking calls, which sleep on the same fd); then ``disarm`` and take
again. The loop never blocks: every core call here returns at once, and no thread is started,
whatever the message size. A dead peer never signals the fd: every await also runs the endpoint's
dead-peer check once per liveness interval (``_Watch.wait``), raising PeerDeadError as a blocking
call would.

Large messages (more than one record of the ring, ``max_chunk_bytes``) travel record by record on the
loop. A reader consumes the records that are there each time its fd turns readable and keeps the
message assembled inside the reader (``_core.try_recv``); a writer publishes the records that fit and
keeps the rest pending inside the writer (``_core.send_nowait`` / ``send_more``), waking when the
readers make room.

Cancellation: a cancelled await never loses or duplicates a message.
  * dequeue: a message is returned by the same synchronous step that completes it, so a cancelled
    dequeue returned nothing. Records of a large message it consumed before the cancellation stay
    assembled in the reader: the next dequeue (async or not) finishes that message and returns it.
  * enqueue: cancelled (or timed out, or failed) before its last record was published, the message is
    withdrawn: no reader gets any of it (records already out are dropped by the readers, told by an
    abort record before the next message). Once the last record is out the await has no suspension
    point left, so a completed send is never reported as cancelled.
  * a pending collect: replies taken stay with the pending collect; await it again or call result().
``asyncio.wait_for`` can drop a result that completed just as its timeout fired (Python < 3.12): give
the timeout to these calls instead.

One coroutine at a time per endpoint (the endpoints' one-thread rule): a ``dequeue`` or ``collect``
(or an await of a pending collect) called while another one of the same endpoint is in progress
raises RuntimeError at once, as a second enqueue while one is pending does; so does a blocking call
of the endpoint (``mq.dequeue``, ``mq.dequeue_many``, ``mq.acquire_read``, ``mq.enqueue``,
``gather.collect``, ``gather.collect_async``, ``pending.result()``) from another thread or coroutine
while one of these is in progress (it would take the message, or the wake-up, the await waits for).
A call whose loop was closed while it was suspended can never go on: the next call of its endpoint
takes the endpoint back (withdraws that call's wait, and its message for an enqueue) instead of
being refused. Device (CUDA) arrays:
``enqueue`` pickles them like any object (no DMA: use the blocking ``mq.enqueue``, docs/gpu.md); a
device message a blocking writer sent is received by ``dequeue`` through the blocking path of
docs/gpu.md (the loop waits for its chunks).
"""
import asyncio
import os
import pickle
import re
import threading
import time
import weakref
from typing import TYPE_CHECKING, Any, Dict, Generator, Iterable, List, Optional, Union

from . import _core, _gpu
from ._args import _check_timeout  # the blocking calls' rule
from ._gather import _ranks_list, _refuse_bool  # a collect's arguments, as gather.collect reads them

if TYPE_CHECKING:
    from ._gather import PendingReplies, ReplyGather
    from ._queue import MessageQueue

_Endpoint = Union[_core.Reader, _core.Writer, _core.GatherCollector]

__all__ = ["dequeue", "enqueue", "collect"]


# The least a loop timer is moved on after it ran before its time (see _Watch: uvloop's tick).
_MIN_TIMER_STEP = 0.001


class _Watch:
    """One endpoint's eventfd as watched by one loop. While a wait of this module is pending the
    callback drains the fd and completes its future. Draining then is safe: the waiter looks again
    (disarm, take, arm = drain + announce + re-check) after every wake, so a signal eaten here is
    never a message left unseen (docs/events.md); and a drain after the waiter's re-check can only
    happen through this callback, which then completes the future the waiter set before it yielded
    (the loop is one thread).

    With no wait pending the callback must not read the fd: once wake_fd() was called, the
    endpoint's blocking calls (mq.dequeue in an executor thread, say) sleep on this same fd, and a
    read here would eat the signal meant for them (they would wake only at their next liveness
    slice). Nor may it leave the fd watched (level-triggered: the loop would call it again and
    again), so it unregisters the fd instead, and the next wait registers it again. The fd thus
    stays registered across a stream of waits (add_reader costs an epoll_ctl and a Handle: not per
    wait); only a signal that finds no wait pending (a blocking call's, or one that crossed a
    disarm) costs a remove and a later add.

    Deadlines cost no timer per wait: one loop timer per endpoint is kept at or before the current
    wait's deadline; when it fires early (it was set for an earlier wait) it is moved to the current
    one. A stream of waits with timeouts thus schedules a timer about once per timeout, not per
    message. A timer run before the deadline by the loop's own clock (uvloop's moves in whole
    milliseconds, rounds a timer's delay, and runs it up to ~1.5 ms early) is moved on by at least a
    millisecond: set again for a deadline less than a tick away, it ran again at once, and again —
    dozens of callbacks per timed-out wait while the clock caught up.

    Fork: a child inherits the loop's epoll instance (one kernel object, shared with the parent), so
    a _Watch closed in a child — its finalizer at the child's exit — must not unregister the fd there:
    that would unregister it in the parent, whose loop would then see no signal while its _Watch
    still says `watching` (every later wait lasting until its liveness check)."""

    __slots__ = ("loop", "fd", "watching", "fut", "deadline", "timer", "timer_at", "liveness", "pid")

    def __init__(self, loop: asyncio.AbstractEventLoop, fd: int, liveness: float) -> None:
        self.loop = loop
        # A duplicate of the endpoint's fd, ours until close(): the endpoint closes its own when it
        # goes, before the finalizer that unregisters this one runs, and epoll cannot remove a closed
        # fd — while another holder (the writer's copy, to signal it) keeps the eventfd open, the
        # registration would stay, and a signalled counter nobody reads would make the loop spin.
        self.fd = -1  # (for __del__, should the dup fail)
        self.fd = os.dup(fd)
        self.liveness = liveness  # seconds between dead-peer checks (the endpoint's liveness interval)
        self.watching = False  # fd registered with the loop (add_reader)
        self.fut: "Optional[asyncio.Future[None]]" = None
        self.deadline: Optional[float] = None  # of the wait in progress (loop time); None: none/forever
        self.timer: Optional[asyncio.TimerHandle] = None
        self.timer_at = 0.0
        self.pid = os.getpid()  # the process whose loop registered the fd (see the class's Fork)

    def watch(self) -> None:
        """Registers the fd with the loop if it is not. Called before every arm, so a signal that
        follows the arm's drain reaches a registered fd, whatever the loop's trigger mode; and the
        caller does not yield between this and future(), so the callback cannot find no wait pending
        (and unregister) in between."""
        if not self.watching:
            self.loop.add_reader(self.fd, self._readable)
            self.watching = True

    def _readable(self) -> None:
        fut = self.fut
        if fut is None:  # no wait of ours: the signal is a blocking waiter's (or late); leave it unread
            self.loop.remove_reader(self.fd)
            self.watching = False
            return
        try:
            os.read(self.fd, 8)
        except BlockingIOError:
            pass
        if not fut.done():
            fut.set_result(None)

    def _timer_fired(self) -> None:
        self.timer = None
        deadline = self.deadline
        if deadline is None:
            return
        now = self.loop.time()
        if now >= deadline:
            fut = self.fut
            if fut is not None and not fut.done():
                fut.set_result(None)
        else:  # set for an earlier wait, or run early by the loop's clock: on to the current deadline
            self.timer_at = max(deadline, now + _MIN_TIMER_STEP)
            self.timer = self.loop.call_at(self.timer_at, self._timer_fired)

    def future(self, deadline: Optional[float]) -> "asyncio.Future[None]":
        """The future of one wait of the armed endpoint: done when the fd turned readable or at
        `deadline` (loop time). The caller awaits it and, however that ends, calls done_waiting().
        There is one such future at a time: _claim() lets one call at a time wait on the endpoint (a
        second future would orphan the first, which the callback and the timer would never see)."""
        fut = self.fut = self.loop.create_future()
        self.deadline = deadline
        if deadline is not None and (self.timer is None or self.timer_at > deadline):
            if self.timer is not None:
                self.timer.cancel()
            self.timer_at = deadline
            self.timer = self.loop.call_at(deadline, self._timer_fired)
        return fut

    def reached(self, t: float) -> bool:
        """Whether loop time `t` has come."""
        return self.loop.time() >= t

    def done_waiting(self, endpoint: _Endpoint) -> None:
        """After every wait, cancellation included: forget the future, withdraw the announcement —
        unless this _Watch was closed meanwhile: its call was taken back (_reclaim) and a later call
        may be armed now, whose announcement is not this one's to withdraw."""
        self.fut = None
        self.deadline = None
        if self.fd >= 0:
            _core.disarm(endpoint)

    async def wait(self, endpoint: _Endpoint, deadline: Optional[float], check_at: float) -> bool:
        """One wait of the armed endpoint: until its fd turns readable, `deadline`, or `check_at` (loop
        times). True: the dead-peer check is due — a peer that died never signals the fd, so the
        caller, once its next take found nothing, runs the check a blocking wait makes every liveness
        interval (after the take: a peer may have published, or freed room, and then died; a blocking
        wait too looks for data before it checks). Cancelled or not, the announcement is withdrawn."""
        try:
            await self.future(check_at if deadline is None else min(deadline, check_at))
        finally:
            self.done_waiting(endpoint)
        return self.reached(check_at)

    def close(self) -> None:
        """Unregisters and closes the fd, on the loop's thread. The endpoint's finalizer may run on any
        thread (wherever its last reference went): a loop's fd table and timers belong to the thread
        running it (asyncio's selector map, libuv's handles under uvloop), so from another thread —
        any but the one this loop runs in now, which need not be the one it first ran in — while it
        runs, the close is handed to the loop; the fd stays open until then, so its number is not
        reused under the registration. A handed close the loop never runs (it was stopping, then
        closed: its queue is dropped) still closes the fd, in __del__. A loop that is closed, or not
        running, is not touched concurrently: closed here."""
        if os.getpid() == self.pid and not self.loop.is_closed() and self.loop.is_running() and not self._on_loop():
            try:
                self.loop.call_soon_threadsafe(self._close_here)
                return
            except RuntimeError:  # the loop closed meanwhile: nothing runs on it any more
                pass
        self._close_here()

    def _on_loop(self) -> bool:
        try:
            return asyncio.get_running_loop() is self.loop
        except RuntimeError:  # no loop runs in this thread
            return False

    def __del__(self, _close: Any = os.close) -> None:  # (os.close bound here: no global looked up late)
        if self.fd >= 0:  # a close handed to a loop that never ran it
            fd, self.fd = self.fd, -1
            _close(fd)

    def _close_here(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
        if self.watching and not self.loop.is_closed() and os.getpid() == self.pid:
            self.loop.remove_reader(self.fd)
        self.watching = False
        if self.fd >= 0:
            fd, self.fd = self.fd, -1  # first: never closed twice, whatever close() does
            os.close(fd)


# core endpoint -> {loop: _Watch}; the registration goes with the endpoint (its fd closes with it).
_watches: "weakref.WeakKeyDictionary[Any, dict]" = weakref.WeakKeyDictionary()


def _drop_watches(table: dict) -> None:
    for w in list(table.values()):
        w.close()


def _watch(endpoint: _Endpoint, liveness: float) -> _Watch:
    """The _Watch of `endpoint` for the running loop (made on first use; `liveness`: its dead-peer
    check interval, seconds)."""
    loop = asyncio.get_running_loop()
    table = _watches.get(endpoint)
    if table is not None:
        w = table.get(loop)
        if w is not None:
            return w
    else:
        table = _watches[endpoint] = {}
        weakref.finalize(endpoint, _drop_watches, table)
    for other in [lp for lp in table if lp.is_closed()]:
        table.pop(other).close()
    w = table[loop] = _Watch(loop, _core.wake_fd(endpoint), liveness)
    return w


class _Claim:
    """One call of this module in progress on an endpoint, from its start to its end (finally:
    completed, failed or cancelled). `owner` (the MessageQueue, ReplyGather or PendingReplies) shows
    it in `_aio_call`, which the owner's blocking calls look at (refuse_blocking_call)."""

    __slots__ = ("call", "what", "loop", "owner", "revoked")

    def __init__(self, call: str, what: str, loop: asyncio.AbstractEventLoop, owner: Any) -> None:
        self.call, self.what, self.loop, self.owner = call, what, loop, owner
        self.revoked = False  # taken back by _reclaim: its own clean-up must not touch the endpoint


# id(core endpoint) -> the call in progress on it. An entry keeps its endpoint alive (the call's frame
# holds it), so the id is not reused meanwhile.
_waiters: Dict[int, _Claim] = {}
# Guards every look-then-change of _waiters (and an endpoint's _aio_call beside it): each loop is one
# thread, but two loops in two threads may claim one endpoint, and a thread switch between a claim's
# look and its mark let both through (both armed the one announcement; one future was orphaned). Held
# for a few dict operations and, in _reclaim, two non-blocking core calls: never across a wait.
# Re-entrant: a garbage collection inside a locked region may finalize a coroutine left suspended on a
# closed loop, whose clean-up (_release) takes the lock again on the same thread. Replaced in a forked
# child, which may have been forked while another thread held it.
_waiters_lock = threading.RLock()


def _fresh_waiters_lock() -> None:
    global _waiters_lock
    _waiters_lock = threading.RLock()


os.register_at_fork(after_in_child=_fresh_waiters_lock)


def _claim(endpoint: _Endpoint, call: str, what: str, owner: Any) -> _Claim:
    """Marks `endpoint` busy with `call` until _release(); RuntimeError if another call holds it.
    One coroutine at a time per endpoint (its one-thread rule): two waits would each arm and disarm
    the one announcement, and the one future per loop (_Watch.future) would orphan the first waiter,
    which then never completed. Refused at the call's start, not only when it would wait, so that a
    second call fails whether or not a message happens to be there; the loop is one thread, and no
    suspension point lies between this check and the mark. A holder whose loop is closed is taken
    back first (_reclaim). Loops of other threads are kept out by _waiters_lock."""
    loop = asyncio.get_running_loop()
    with _waiters_lock:
        holder = _waiters.get(id(endpoint))
        if holder is not None and not _reclaim(endpoint, holder):
            elsewhere = "" if holder.loop is loop else " (on another thread's event loop)"
            raise RuntimeError(f"{call}: {holder.call} of this {what} is already in progress in another coroutine"
                               f"{elsewhere}; one coroutine at a time may wait on an endpoint (await or cancel that "
                               "one first)")
        claim = _waiters[id(endpoint)] = _Claim(call, what, loop, owner)
        owner._aio_call = claim
    return claim


def _release(endpoint: _Endpoint, claim: _Claim) -> None:
    """Ends the call _claim() marked — if it still holds the endpoint (a call taken back does not)."""
    if claim.revoked:  # _reclaim took it out (under the lock): nothing of it is left to end
        return
    with _waiters_lock:
        if _waiters.get(id(endpoint)) is claim:
            del _waiters[id(endpoint)]
            claim.owner._aio_call = None


def _reclaim(endpoint: _Endpoint, holder: _Claim) -> bool:
    """Takes `endpoint` back from a call whose loop was closed while it was suspended (the loop will
    never resume it): withdraws its wait, and for an enqueue its pending message (no reader gets any
    of it), and closes its _Watch — which drops its future, so the suspended task can be collected,
    and makes its done_waiting() leave the endpoint alone; the revoked flag does the same for its
    _release and send_abandon. False (nothing done) while that loop is open. The caller holds
    _waiters_lock."""
    if not holder.loop.is_closed():
        return False
    holder.revoked = True
    table = _watches.get(endpoint)
    # Held here until the end: dropping the watch is what makes the abandoned call garbage, and a
    # collection inside this region (the lock is re-entrant) must find the take-back whole or not begun.
    watch = table.pop(holder.loop, None) if table is not None else None
    _core.disarm(endpoint)
    if isinstance(endpoint, _core.Writer):  # an enqueue_async: its message is pending in the writer
        _core.send_abandon(endpoint)
    _waiters.pop(id(endpoint), None)
    holder.owner._aio_call = None
    if watch is not None:
        watch.close()
    return True


def refuse_blocking_call(owner: Any, endpoint: _Endpoint, what: str) -> None:
    """For the owners' blocking calls, made while `owner._aio_call` is set: takes the endpoint back
    from a call whose loop is closed, else raises RuntimeError (that call waits for the message, or
    the wake-up, this one would take). The call holding the endpoint is read again under the lock: the
    one the caller saw may have ended (nothing to refuse) or been followed by another (refused as well)."""
    if owner._aio_call is None:  # released since the caller looked (by the loop's thread)
        return
    with _waiters_lock:
        holder = _waiters.get(id(endpoint))
        if holder is None or _reclaim(endpoint, holder):
            return
    raise RuntimeError(f"{what}: {holder.call} of this {holder.what} is in progress on an event loop; one call at "
                       "a time per endpoint (await it, or cancel it, first)")


class _Timeout:
    """A call's timeout on two clocks: the loop's, whose timer ends a wait (`at`), and the monotonic
    clock, which decides whether the time is up. uvloop reads its clock once per loop iteration (in
    milliseconds), so its loop.time() lags real time: judged by it alone, a wait timed out up to ~0.7 ms
    early. `passed()` is true once the monotonic clock says so; when the loop's clock was early it moves
    `at` on by what is left."""

    __slots__ = ("loop", "end", "at")

    def __init__(self, loop: asyncio.AbstractEventLoop, timeout: float) -> None:
        self.loop = loop
        self.end = time.monotonic() + timeout
        self.at = loop.time() + timeout

    def passed(self) -> bool:
        if self.loop.time() < self.at:
            return False
        left = self.end - time.monotonic()
        if left <= 0:
            return True
        self.at = self.loop.time() + max(left, _MIN_TIMER_STEP)
        return False


def _timeout(loop: asyncio.AbstractEventLoop, timeout: Optional[float]) -> Optional[_Timeout]:
    return None if timeout is None else _Timeout(loop, timeout)


def _timer_at(t: Optional[_Timeout]) -> Optional[float]:
    return None if t is None else t.at


# ---- MessageQueue reader ------------------------------------------------------------------------
async def dequeue(mq: "MessageQueue", timeout: Optional[float] = None) -> Any:
    """Awaits the next object of a MessageQueue reader (as ``mq.dequeue``, without blocking the loop).

    ``mq.dequeue_async(timeout)`` is this call. Raises TimeoutError after ``timeout`` seconds (None:
    wait forever; 0: only a message already there), ClosedError, PeerDeadError, and everything
    ``mq.dequeue`` raises; PermissionError if the writer cannot take the eventfd; RuntimeError on the
    writer, a remote reader, or while another dequeue of this reader is in progress.
    """
    reader = mq._reader
    if type(reader) is not _core.Reader:
        raise RuntimeError("dequeue_async: this MessageQueue is the writer" if reader is None else
                           "dequeue_async: a remote reader (over ZeroMQ) has no eventfd to await; use dequeue()")
    _check_timeout(timeout)
    claim = _claim(reader, "dequeue_async", "reader", mq)
    try:
        return await _dequeue(mq, reader, timeout)
    finally:  # completed, failed or cancelled: the next call may wait
        _release(reader, claim)


async def _dequeue(mq: "MessageQueue", reader: _core.Reader, timeout: Optional[float]) -> Any:
    if mq._gpu_pending is not None:  # a device message a timed-out blocking dequeue left half received
        return _gpu.resume(mq, timeout)
    if mq._burst_left:  # what a dequeue_many took and left for the next read
        return mq._take_burst_left(1, timeout, None, "dequeue_async")[0]
    parts = _core.try_recv(reader)
    if parts is None:  # nothing there yet (or part of a large message): wait on the loop
        w = _watch(reader, mq.handle.liveness_interval)
        loop = w.loop
        deadline = _timeout(loop, timeout)
        check_at = loop.time() + w.liveness  # the dead-peer check's clock, one per call
        while parts is None:
            if deadline is not None and deadline.passed():
                raise TimeoutError(f"dequeue timed out after {timeout} s")
            due = False
            w.watch()
            if not _core.arm(reader):  # cancelled in the wait: nothing was taken
                due = await w.wait(reader, _timer_at(deadline), check_at)
            # No suspension point between taking a message and returning it: a cancellation arrives
            # at the await above, before anything was taken.
            parts = _core.try_recv(reader)
            if parts is None and due:
                _core.check_peers(reader)  # PeerDeadError: the writer died
                check_at = loop.time() + w.liveness
    if _gpu.is_device_message(parts):
        return _gpu.receive(mq, parts, timeout, None)
    return pickle.loads(parts[0], buffers=parts[1:])


# ---- MessageQueue writer ------------------------------------------------------------------------
async def enqueue(mq: "MessageQueue", obj: Any, timeout: Optional[float] = None) -> None:
    """Enqueues ``obj`` on a MessageQueue writer, awaiting room in the ring on the loop (no thread),
    record by record for a message larger than one record.

    ``mq.enqueue_async(obj, timeout)`` is this call. Raises TimeoutError (the message is withdrawn),
    ClosedError, PeerDeadError, RuntimeError (on a reader, or while another enqueue of this queue is
    pending), what pickle raises; ValueError for a negative timeout. ``obj``'s buffers are read while
    the await lasts: do not change them meanwhile.
    """
    writer = mq._writer
    if writer is None:
        raise RuntimeError("enqueue_async: this MessageQueue is a reader")
    _check_timeout(timeout)
    if mq._aio_call is not None:
        refuse_blocking_call(mq, writer, "enqueue_async")
    # Claimed before the message starts, and started inside the try: a signal handler's exception
    # (KeyboardInterrupt) raised as send_nowait returns — with the rest of the message pending in the
    # writer — is then abandoned below like any other; started before the claim, nothing was left to
    # abandon it, and every later enqueue of the queue was refused as "in progress" for good.
    claim = _claim(writer, "enqueue_async", "queue", mq)
    try:
        if _core.send_nowait(writer, mq._dumps(obj)):
            return
        # The message (or its rest) is pending in the writer: publish it as readers make room.
        w = _watch(writer, mq.handle.liveness_interval)
        loop = w.loop
        deadline = _timeout(loop, timeout)
        check_at = loop.time() + w.liveness
        while True:
            if deadline is not None and deadline.passed():
                raise TimeoutError(f"enqueue timed out after {timeout} s: the slowest reader did not free ring "
                                   "space (the message was withdrawn)")
            due = False
            w.watch()
            if not _core.arm(writer):  # room for the pending message's next record
                due = await w.wait(writer, _timer_at(deadline), check_at)
            if _core.send_more(writer):  # the last record is out: no suspension point after this
                return
            if due:
                _core.check_peers(writer)  # PeerDeadError: a lagging reader died
                check_at = loop.time() + w.liveness
    except BaseException:  # cancelled, timed out, closed: no reader gets any of it
        if not claim.revoked:  # (taken back: _reclaim withdrew it, and a later message may be pending)
            _core.send_abandon(writer)
        raise
    finally:
        _release(writer, claim)


# ---- ReplyGather collector ----------------------------------------------------------------------
async def collect(gather: "ReplyGather", tag: int, ranks: Optional[Iterable[int]] = None,
                  timeout: Optional[float] = None) -> List[Any]:
    """Awaits the replies to ``tag`` on a ReplyGather collector (as ``gather.collect``).

    Replies a timed-out or cancelled ``collect`` took stay with the gather (its collect keeps them):
    the next collect of the tag returns them. To start a collect now and await it later, use
    ``await gather.collect_async(tag, ranks, timeout)``. RuntimeError while another collect of this
    gather is in progress on the loop.
    """
    core = gather._collector
    if core is None:
        raise RuntimeError("collect: this ReplyGather is a worker")
    if tag is True or tag is False:  # the binding would take it as 1 / 0 (gather.collect refuses it too)
        _refuse_bool(tag, None)
    _check_timeout(timeout)
    # As gather.collect reads them: None, one rank, or an iterable of ranks (checked there).
    wanted = None if ranks is None else _ranks_list(ranks, gather.n_ranks)
    claim = _claim(core, "collect", "ReplyGather", gather)
    try:
        return await _collect(gather, core, tag, wanted, timeout)
    finally:  # completed, failed or cancelled: the next call may wait
        _release(core, claim)


async def _collect(gather: "ReplyGather", core: _core.GatherCollector, tag: int, wanted: Optional[List[int]],
                   timeout: Optional[float]) -> List[Any]:
    w: Optional[_Watch] = None
    deadline: Optional[_Timeout] = None
    check_at = 0.0
    due = False
    while True:
        try:
            return gather._collect_now(tag, wanted, 0)
        except TimeoutError as e:
            if w is None:
                w = _watch(core, gather._liveness)
                deadline = _timeout(w.loop, timeout)
                check_at = w.loop.time() + w.liveness
            if deadline is not None and deadline.passed():
                # the poll's own "(timeout 0 s)" is not the caller's timeout
                raise TimeoutError(re.sub(r"\(timeout [^)]*\)$", f"(timeout {timeout} s)", str(e))) from None
        if due:  # after the poll above took what came: a worker may have replied, then died
            _core.check_peers(core, tag, wanted)  # PeerDeadError: a pending worker died
            check_at = w.loop.time() + w.liveness
        due = False
        w.watch()
        if not _core.arm(core, tag, wanted):
            due = await w.wait(core, _timer_at(deadline), check_at)


def await_pending(pending: "PendingReplies") -> Generator[Any, None, List[Any]]:
    """``PendingReplies.__await__``: awaits a collect started by ``gather.collect_async`` on the
    running loop (through the collector's eventfd, armed for the ranks still missing), then returns
    ``pending.result()`` (which no longer waits) or raises its error. The collect's own timeout
    applies. A cancelled await leaves the collect pending: await it again, or call result(). Awaited
    by a second coroutine while one awaits it, it raises RuntimeError there."""
    return _pending_result(pending).__await__()


async def _pending_result(pending: "PendingReplies") -> List[Any]:
    core = pending._collector
    claim = _claim(core, "await collect_async(...)", "ReplyGather", pending)
    try:
        return await _await_pending(pending, core)
    finally:  # completed, failed or cancelled: the next await may wait
        _release(core, claim)


async def _await_pending(pending: "PendingReplies", core: _core.GatherCollector) -> List[Any]:
    if not pending.done():  # (False too once result() was taken: result() then says so)
        w = _watch(core, pending._liveness)
        # The collect's own time left, judged as every call here judges a timeout (_Timeout: the
        # monotonic clock, the collector's too, decides; the loop's timer only ends a wait).
        t = _timeout(w.loop, _core.pending_collect_seconds_left(core))
        check_at = w.loop.time() + w.liveness
        due = False
        while pending._mine() and not pending._taken and not pending.done():  # done() takes what came first
            if t is not None and t.passed():
                break
            if due:  # a dead pending worker ends the collect: done() turns true, result() raises
                _core.check_pending_collect_peers(core)
                check_at = w.loop.time() + w.liveness
                due = False
                continue
            w.watch()
            if not _core.arm_pending_collect(core):  # armed for exactly the ranks still missing
                # (the loop timer ends it at the collect's own deadline)
                due = await w.wait(core, _timer_at(t), check_at)
    return pending._result()
