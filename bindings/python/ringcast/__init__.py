"""ringcast: one writer -> N reader processes over a shared-memory broadcast ring.

``ringcast.MessageQueue`` has the constructor and methods of vLLM's shm_broadcast MessageQueue, so
executor code can switch by changing an import. Every blocking call waits in the kernel with the GIL
released. See docs/python.md.
"""

from ringcast._core import ClosedError, PeerDeadError, RingcastError, StaleReplyError
from ringcast._gather import GatherHandle, PendingReplies, ReplyGather
from ringcast._queue import Handle, MessageQueue, OOB_THRESHOLD

__all__ = [
    "MessageQueue",
    "Handle",
    "RingcastError",
    "ClosedError",
    "PeerDeadError",
    "StaleReplyError",
    "ReplyGather",
    "GatherHandle",
    "PendingReplies",
    "OOB_THRESHOLD",
]
__version__ = "0.1.0"
