"""Out-of-band pickling: a message as its wire parts ``[pickle, *buffers]``, large buffers never copied
into the pickle. One rule for every sender (MessageQueue, the vLLM plug-in's tensor pickler, the GPU
path's device pickler); the binding's one-call enqueue pickles with the same rule in C++ (pickling.cpp).
"""

from __future__ import annotations

import math
import pickle
from typing import Any, Callable


def pickle5(obj: Any, buffer_callback: Callable[[pickle.PickleBuffer], bool]) -> bytes:
    """A protocol-5 pickle; buffer_callback decides which buffers leave it (False: out of band)."""
    return pickle.dumps(obj, protocol=5, buffer_callback=buffer_callback)


def _integer_threshold(threshold: float) -> int:
    """The compiled pickler's threshold for `oob_threshold`: a buffer of n bytes stays in-band iff n is below it."""
    if threshold <= 0:
        return 0
    return 1 << 62 if threshold >= 1 << 62 else math.ceil(threshold)


def dumps_out_of_band(obj: Any, threshold: int, max_buffers: int,
                      pickle_with: Callable[[Any, Callable[[pickle.PickleBuffer], bool]], bytes] = pickle5) -> list:
    """The wire parts of a message: ``[pickle, *buffers]``. Contiguous buffers of at least ``threshold``
    bytes (numpy arrays, PickleBuffers, ...), up to ``max_buffers`` of them, travel out of band: copied
    from the object straight into the ring, never into the pickle. One function for every sender
    (MessageQueue, the vLLM plug-in's tensor pickler, the GPU path's device pickler: ``pickle_with``).
    """
    oob: list = []

    def callback(pb: pickle.PickleBuffer) -> bool:  # True: keep in-band
        if len(oob) >= max_buffers:
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

    # The C pickler serializes bytes/bytearray in-band before any hook runs; a large one passed as the
    # message itself is wrapped so it travels out of band (no copy into the pickle). A memoryview is
    # always wrapped: pickle cannot pickle one at all (the callback then sizes it in bytes).
    if type(obj) is memoryview or (type(obj) in (bytes, bytearray) and len(obj) >= threshold):
        obj = pickle.PickleBuffer(obj)
    if pickle_with is pickle5:  # the default: one call frame less on every enqueue
        data = pickle.dumps(obj, protocol=5, buffer_callback=callback)
    else:
        data = pickle_with(obj, callback)
    return [data, *oob] if oob else [data]

