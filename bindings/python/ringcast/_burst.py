"""What a dequeue_many takes off the ring and has not returned yet: MessageQueue's burst reads.

A burst is taken off the ring in one binding call and unpickled afterwards, in Python. Until every
message of it is returned, it waits here (``_burst_left``) and every read of the reader takes from
here first, under one lock that keeps the one-thread rule the binding keeps for ring calls. Nothing of
a burst is lost or served twice: the binding puts each message here as it takes it off the ring (an
interrupt as its call returns finds the burst here; only a MemoryError in keeping one message loses
that one); a message that fails to unpickle ends the burst
before it, and the next read raises its error; a KeyboardInterrupt leaves the whole rest.
"""

from __future__ import annotations

from typing import Any, List, NoReturn, Optional, Tuple

from ringcast import _gpu
from ringcast._core import RingcastError


class BurstReads:
    """MessageQueue's reads of what a dequeue_many left (a mix-in: it uses the queue's ``_reader``
    and ``_loads``)."""

    # Messages a dequeue_many took off the ring but did not return, in order: (True, object) already
    # unpickled, (False, parts) not yet. Every read takes from here first (_take_burst_left). A reader's
    # own list, made with it and never replaced: the binding's recv_many appends to it as it takes each
    # message off the ring.
    _burst_left: List[Tuple[bool, Any]]
    # The one-thread rule for what is served from _burst_left, as the binding's endpoint guard keeps it
    # for every ring call: held (never waited for) by a dequeue_many from its ring call to its return
    # and by every read that serves _burst_left, unpickling included; a second thread meanwhile gets
    # the binding's RuntimeError (_refuse_second_thread). Readers only (_reader_side makes it); a plain
    # dequeue() with nothing left never touches it.
    _burst_lock: Any = None
    _reader: Any  # the queue's: its binding endpoint, its unpickling, its device message in progress
    _loads: Any
    _gpu_pending: Any

    def _loads_one_of_a_burst(self, left: List[Tuple[bool, Any]]) -> Any:
        """_serve_burst_left's work for a burst of one message that is one pickle (no out-of-band
        buffers, so no device message), _burst_lock held, without its loop and checks: with
        dequeue_many's shortcut for the common arguments, a 1-message call 2.0 -> 1.2 us on the 2-core
        VM. `left` is _burst_left, holding that message as the binding's recv_many put it there. The
        same outcomes, since _burst_left holds the message while it unpickles, as on the general path:
        the reader is taken as in use meanwhile (every other read meets the lock and is refused,
        unpickled code that reads this reader too); an unpickling error is raised and the message
        consumed; a KeyboardInterrupt or other BaseException leaves it for the next read."""
        try:
            obj = self._loads(left[0][1])
        except Exception:
            del left[0]
            raise
        del left[0]
        return obj

    def _refuse_second_thread(self, what: str) -> NoReturn:
        """_burst_lock is held: what the binding's guard says to a second thread (a reader shut down or
        inherited through fork says that first, as the guard does)."""
        self._reader.check_open(what)
        raise RuntimeError("this ringcast endpoint is already in use by another thread; use one "
                           "MessageQueue or ReplyGather endpoint per thread")

    def _take_burst_left(self, max_n: int, timeout: Optional[float], device: Any, what: str) -> List[Any]:
        """Up to max_n objects (at least one) from _burst_left, in order, for a read that found it not
        empty; under _burst_lock, as every reader call keeps the one-thread rule: a second thread is
        refused, never served a message twice. Found empty once held, another thread's call took the
        rest between the caller's look and here: the two calls overlapped, so this one is refused too."""
        lock = self._burst_lock
        if not lock.acquire(False):
            self._refuse_second_thread(what)
        try:
            if not self._burst_left:
                self._refuse_second_thread(what)
            return self._serve_burst_left(max_n, timeout, device, what)
        finally:
            lock.release()

    def _serve_burst_left(self, max_n: int, timeout: Optional[float], device: Any, what: str) -> List[Any]:
        """_take_burst_left's work, _burst_lock held. The burst is off the ring already, so an
        error must not lose it: a message that fails to unpickle after others were returned waits for
        the next read, which raises its error (consumed, as dequeue() consumes it); the first one's
        error is raised at once. An exception that is not an unpickling error (KeyboardInterrupt)
        leaves every message, the failing one too, for the next read. A device message is a read of
        its own (its arrays follow it in the ring; a receive that stops part-way is resumed from
        _gpu_pending, not from here). A reader shut down says so first. Unpickling runs with the lock
        held, each message still first in _burst_left until it is unpickled: code it runs that reads
        this reader is refused (RuntimeError), as a second thread is."""
        self._reader.check_open(what)
        left = self._burst_left
        objs: List[Any] = []
        while left and len(objs) < max_n:
            unpickled, item = left[0]
            if not unpickled and _gpu.is_device_message(item):
                if objs:  # the objects before it first
                    break
                del left[0]  # from here on _gpu_pending carries it
                return [_gpu.receive(self, item, timeout, device)]
            if not unpickled:
                try:
                    item = self._loads(item)
                except Exception:
                    if objs:  # these first; the next read raises this one's error
                        break
                    del left[0]
                    raise
                except BaseException:
                    left[:0] = [(True, obj) for obj in objs]
                    raise
            del left[0]
            objs.append(item)
        return objs

    def _refuse_raw_read_while_objects_wait(self) -> None:
        """acquire_read's refusal while objects read from the ring are still to be returned: what a
        dequeue_many left, or a device message partly received (its next chunk is held for the
        retry, not a message of its own). While a dequeue_many or a read of its leftovers runs (the
        lock held: another thread, or code its unpickling runs), the reader is in use, as every
        reader call says then."""
        lock = self._burst_lock
        if lock is not None and lock.locked():
            self._refuse_second_thread("acquire_read")
        if self._burst_left:
            raise RingcastError("acquire_read: messages a dequeue_many took are still to be read: use "
                                "dequeue() first")
        if self._gpu_pending is not None:
            raise RingcastError("acquire_read: a device message is partly received; finish it with dequeue()")
