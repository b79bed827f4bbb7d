"""ringcast: one writer -> N reader processes over a shared-memory broadcast ring.

``ringcast.MessageQueue`` has the constructor and methods of vLLM's shm_broadcast MessageQueue, so
executor code can switch by changing an import. ``ringcast.ReplyGather`` carries the replies back:
N worker ranks -> the executor, collected with one wait. See docs/python.md.

Public names:
    MessageQueue    the broadcast queue (writer from the constructor, readers from a Handle).
    Handle          what a reader process needs to attach; picklable.
    ReplyGather     replies from N worker ranks to one executor, collected with one wait.
    GatherHandle    what a worker process needs to attach; picklable.
    PendingReplies  a collect started by ReplyGather.collect_async().
    OOB_THRESHOLD   the default oob_threshold (4096 bytes): buffers at least this large travel
                    out of band, copied straight into and out of the ring.
    RingcastError, ClosedError, PeerDeadError, StaleReplyError, SegmentError, FellBehindError:
                    the exceptions (below).

Timeouts: every blocking call takes ``timeout`` in seconds: None waits forever, 0 polls (takes what
is ready now, else raises TimeoutError at once), a negative value raises ValueError.

The GIL is never held while blocked. A call first takes what is ready (data, ring space) without
dropping the GIL; only then does it release the GIL and wait in the kernel. In the main thread a
signal ends the kernel wait, so Ctrl-C raises KeyboardInterrupt at once (within 50 ms if it came
while the wait spun); other threads wait in liveness-interval slices.

Wait strategies (``wait=``): 'hybrid' (default: spin, then sleep in the kernel on a futex; the spin
is adaptive: up to ``spin_max_us`` while every recent wait fitted in it, else about twice the
recent waits; ``spin_max_us`` is by default 5000 where the machine has a CPU for every process of
the queue, 2000 where they share CPUs (ReplyGather's collect: 10000);
``spin_us`` when ``spin_max_us`` is 0), 'futex' (sleep at once), 'spin' (busy-spin, never sleeps),
'spin_yield' (sched_yield loop, never sleeps).

Errors:
    TimeoutError (builtin)  the timeout passed.
    ClosedError             the queue or gather was shut down (a reader: after draining what was sent).
    PeerDeadError           the peer process died; names it (pid, rank) within two liveness
                            intervals (``liveness_interval``, ``liveness_s`` in ringcast._core) of
                            the later of its death and the call blocking.
    StaleReplyError         a reply carried another request's tag.
    SegmentError            the shared memory is not a ringcast segment this process can use:
                            another program's object, another ringcast version's, or contents
                            overwritten (a header, a record's header, a message's framing).
                            Also a ValueError.
    FellBehindError         a remote reader missed messages (docs/remote.md).
    ValueError              a bad argument, a bad or stale handle, a wrong or taken rank.
    TypeError               an argument of the wrong type.
    PermissionError         the segment belongs to another user (owner-only by default).
    RuntimeError            the wrong side (a reader's enqueue), two threads on one endpoint.
    RingcastError           the base of the five above; raised itself for misuse of raw chunks
                            or a queue used in a forked child.

Clean exit: a reader that leaves releases its rank and the writer never waits for it again; a
writer that shuts down lets the readers drain, then they get ClosedError.
"""

from ringcast._core import ClosedError, PeerDeadError, RingcastError, SegmentError, StaleReplyError
from ringcast._core import FellBehindError  # a remote reader missed messages (docs/remote.md)
from ringcast._gather import GatherHandle, PendingReplies, ReplyGather
from ringcast._queue import Handle, MessageQueue, OOB_THRESHOLD

# The exception types are made by ringcast._core; their full documentation is kept here with the rest
# of the Python API.
RingcastError.__doc__ = """Base class of ringcast's own exceptions (ClosedError, PeerDeadError, StaleReplyError,
SegmentError, FellBehindError).

Raised itself for misuse that is not a bad argument: acquire_read() of a message sent with
enqueue() or dequeue() of an acquire_write() chunk (the message is left in place), a view of an
acquire_write() / acquire_read() chunk (or one derived from it) that outlived its with-block, and
every write / read of that queue while it lives, or an endpoint inherited through fork (create a
new one from the handle in the child).
"""
ClosedError.__doc__ = """The queue or gather was shut down.

A reader gets it once the writer shut down and every message sent before has been read; any side
gets it after its own shutdown()/close(), and a call blocked in another thread wakes with it. From
ReplyGather.collect(): a pending worker closed its reply ring (the message names the ranks).
"""
PeerDeadError.__doc__ = """The peer process died: the writer, a reader, a gather worker or the executor.

The message names the dead process (its pid, and a reader's rank index or a worker's rank). A
blocked call checks its peers every liveness_interval, so it raises within two intervals of the
later of the death and the call blocking. A stopped or slow peer is alive: the call times out
instead. Messages published before the death are still delivered first.
"""
StaleReplyError.__doc__ = """A reply carried another request's tag (ReplyGather.collect()).

The message names the rank and both tags. The stale reply is consumed; the good replies the collect
took before it are kept for the next collect of the same tag.
"""

SegmentError.__doc__ = """The shared memory is not a ringcast segment this process can use.

One type for every cause, named in the message: another program's object of that name (foreign
magic), a segment of another ringcast version, or contents that ringcast did not write as they are
(a header field, a ring record's header or a message's framing overwritten: corrupt). Raised where
the segment is opened (MessageQueue.create_from_handle, ReplyGather.create_from_handle) and by a read
that meets a corrupt record or framing; a remote reader raises it for a frame that is not ringcast's
remote protocol (the same causes, over the network). Payload bytes carry no checksum: a pickle
overwritten inside a message fails as its unpickling does (pickle.UnpicklingError, ...). A subclass of ValueError as well as of RingcastError:
the foreign and other-version cases were ValueErrors before this type existed.
"""

__all__ = [
    "MessageQueue",
    "Handle",
    "RingcastError",
    "ClosedError",
    "PeerDeadError",
    "StaleReplyError",
    "SegmentError",
    "FellBehindError",
    "ReplyGather",
    "GatherHandle",
    "PendingReplies",
    "OOB_THRESHOLD",
]
__version__ = "0.1.0"
