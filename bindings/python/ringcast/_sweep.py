"""Sweeping /dev/shm of what killed processes left behind (the library's rule, as `ringcast gc`)."""
import logging

from ringcast import _core

# Names MessageQueue and ReplyGather choose when the caller gives none. Only these are swept at
# creation: a name the caller chose may be meant to outlive its processes (`ringcast gc` sweeps all).
GENERATED_PREFIX = "ringcast-py-"

_log = logging.getLogger("ringcast")


def sweep_generated_names() -> None:
    """Removes this user's abandoned segments with generated names; logs one line if any went."""
    swept = _core.sweep_abandoned(GENERATED_PREFIX)
    if swept:
        bells = sum(1 for name, _ in swept if name.endswith(".bell"))
        mib = sum(size for _, size in swept) / (1 << 20)
        also = f" and {bells} gather doorbell(s)" if bells else ""
        _log.warning("ringcast: removed %d abandoned segment(s)%s (%.1f MiB of /dev/shm) left by killed processes; "
                     "sweep_abandoned=False keeps them, `python3 -m ringcast gc` sweeps by hand",
                     len(swept) - bells, also, mib)
