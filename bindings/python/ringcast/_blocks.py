"""The end of a zero-copy block (``acquire_write`` / ``acquire_read``, and the GPU path's chunks)."""
from typing import Callable

from ringcast._core import RingcastError


def end_block(end: Callable[[], None], ok: bool) -> None:
    """Runs the block's end, `end` (commit_raw / release_raw). When the block's body raised (not ok),
    a view of the chunk may live on only in that exception's traceback (a helper's frame that held a
    slice): its RingcastError must not replace the body's exception — the endpoint has kept the chunk
    all the same (refusing writes / reads until that view is gone, which it is once the exception is
    handled and dropped), and the body's exception goes on as raised."""
    try:
        end()
    except RingcastError:
        if ok:
            raise
