"""The caller's arguments and the binding's refusals, in the caller's terms (MessageQueue, ReplyGather,
the event-loop waits): one rule per argument kind, and the errors retold with what was being done.

The hot paths pass their arguments to the compiled binding unchecked (a check per call costs what a
step is measured in); they call ``raise_in_callers_terms`` only once the binding has refused one.
"""

from __future__ import annotations

import numbers
import operator
import re
from typing import Any, NoReturn, Optional

from ringcast import _core


def retold(e: ValueError, text: str) -> ValueError:
    """``text`` (what was being done, and e's reason) as an exception of e's own type: a SegmentError
    told with its context stays a SegmentError, which a caller can tell from a bad argument. For the
    binding's ValueErrors only (built from a message alone, as they are)."""
    return type(e)(text)


def _in_python_terms(e: ValueError) -> str:
    """The core's reason, with advice Python cannot follow retold: a rank released by a clean detach
    is told to come back with the C++ ReaderOptions::keep_place, which this binding does not offer."""
    text = str(e)
    if "keep_place" not in text:
        return text
    text = re.sub(r"\s*\([^()]*keep_place[^()]*\)", "", text)
    return (f"{text}; a released rank cannot be attached again in this queue (its reader's shutdown(), or "
            "its MessageQueue garbage-collected, released it). Python has no keep_place: keep that reader's "
            "MessageQueue open while the rank may still be needed, or have the writer create a new queue "
            "and attach with its new handle")


def check_handle_version(handle) -> None:
    """Refuses a handle pickled by another ringcast version (its fields may mean other things).

    Called before anything is attached. Looks at the instance's own fields: a pickle from a version
    without the field must not pick up the class default.

    Raises:
        ValueError: the handle's abi_version is not this ringcast's (or missing), with the reason.
    """
    version = vars(handle).get("abi_version")
    if version != _core.ABI_VERSION:
        raise ValueError(f"handle from another ringcast version (ABI {version if version is not None else 'unknown'}); "
                         f"this ringcast speaks ABI {_core.ABI_VERSION}: export a new handle from the writer")


def _check_timeout(timeout: Optional[float]) -> None:
    """A timeout as the blocking calls take it: a number of seconds >= 0 (not NaN), or None — checked
    also where a call does not wait (a local reader's wait_until_ready), so that a bad one is never
    silently taken. A bool is not a timeout (True is no "1 second"): TypeError. The hot paths
    (enqueue, dequeue) pass the timeout to the binding unchecked, which would take a bool as a
    float: they call this for a bool first (``timeout is True or timeout is False``)."""
    if timeout is None:
        return
    if isinstance(timeout, bool) or not isinstance(timeout, numbers.Real):  # numpy's and Fraction too
        raise TypeError(f"timeout must be a number of seconds or None, got {type(timeout).__name__}")
    if not float(timeout) >= 0:  # NaN too
        raise ValueError(f"timeout must be >= 0 or None, got {timeout}")


_UNSET: Any = object()

# The largest ring the core makes (layout::kMaxCapacity in include/ringcast/layout.hpp: 1 TiB); a ring's
# largest record is a quarter of it, less 16 bytes of header.
MAX_CAPACITY = 1 << 40
# Ranks travel to the core as uint32.
MAX_RANK = 2**32 - 1


def raise_in_callers_terms(e: TypeError, method: str, *, tag: Any = _UNSET, timeout: Any = _UNSET) -> NoReturn:
    """Raises what the binding call `method`'s refusal of its arguments means to the caller; called in
    the except clause that caught `e`. The hot paths pass their arguments to the binding unchecked (a
    check per call costs what a step is measured in); pybind11 then refuses a bad one with
    "<method>(): incompatible function arguments" and its own signatures. This names the bad tag or
    timeout instead — TypeError (not a number), ValueError (out of range). Any other TypeError (an
    object that cannot be pickled, a __reduce__'s own, another binding call's refusal inside an
    unpickling) is re-raised as it was, its cause and traceback kept."""
    if str(e).startswith(f"{method}(): incompatible function arguments"):
        if tag is not _UNSET:
            check_tag(tag)
        if timeout is not _UNSET:
            try:
                _check_timeout(timeout)
            except (TypeError, ValueError) as bad:
                raise bad from None
    raise  # noqa: PLE0704 (re-raises `e`, the exception being handled)


def check_tag(tag: Any) -> int:
    """A request tag as the binding takes it (bindings/python/src/fastcall.cpp): an integer — an int
    or anything with __index__ (numpy's integers), not a bool — in 0..2**64-1; TypeError, ValueError."""
    if isinstance(tag, bool):
        raise TypeError("tag must be an int, got bool")
    try:
        value = operator.index(tag)
    except TypeError:
        raise TypeError(f"tag must be an int, got {type(tag).__name__}") from None
    if not 0 <= value < 2**64:
        raise ValueError(f"tag must be in 0..2**64-1, got {tag}")
    return value


def _check_int(name: str, value: Any, minimum: int, maximum: Optional[int] = None, why: str = "") -> int:
    """``value`` as an int argument ``name`` takes it, returned as a plain int: TypeError unless an
    integer (an int or numpy's integers; not a bool), ValueError below ``minimum`` or above ``maximum``
    (``why``: what the limit is, said after it)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    value = int(value)  # a numpy integer becomes an int: what handles carry must unpickle without numpy
    if maximum is None:
        if value < minimum:
            raise ValueError(f"{name} must be >= {minimum}, got {value}")
    elif not minimum <= value <= maximum:
        raise ValueError(f"{name} must be in {minimum}..{maximum}{f' ({why})' if why else ''}, got {value}")
    return value


def check_endpoint_types(name: Any, wait: Any, spin_us: Any, spin_max_us: Any, liveness_interval: Any,
                         spin_max_us_may_be_none: bool, **strings: Any) -> None:
    """TypeError naming the argument for the endpoint options of a wrong type (their ranges are the
    binding's to judge), before anything is made: the binding's own refusal said only "incompatible
    constructor arguments", and a bytes name was taken, to fail later in other words. None is a
    spin_max_us where it means "the default" (MessageQueue's). ``strings``: further arguments that
    must be str (ReplyGather's method). An empty name is a ValueError (it was taken as None)."""
    if name is not None and not isinstance(name, str):
        raise TypeError(f"name must be a str (or None: a generated one), got {type(name).__name__}")
    if name == "":
        raise ValueError("name must be 1..200 characters (or None: a generated one), got ''")
    for arg, value in (("wait", wait), *strings.items()):
        if not isinstance(value, str):
            raise TypeError(f"{arg} must be a str, got {type(value).__name__}")
    for arg, value, optional in (("spin_us", spin_us, False), ("spin_max_us", spin_max_us, spin_max_us_may_be_none),
                                 ("liveness_interval", liveness_interval, False)):
        if value is None and optional:
            continue
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"{arg} must be a number, got {type(value).__name__}")


def check_byte_count(name: str, value: Any) -> None:
    """TypeError / ValueError naming ``name`` unless ``value`` is a number of bytes, an int or a float
    (inf: never reached), not a bool or NaN. Asked before anything is made: judged later, a refusal left
    the segment in /dev/shm while the exception lived, and said "cannot convert float NaN to integer"
    or "'<=' not supported"."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number of bytes (int or float), got {type(value).__name__}")
    if value != value:
        raise ValueError(f"{name} must be a number of bytes, got NaN")


def require_remote(what: str, connect_ip: Optional[str], peers: str, listener: str) -> None:
    """Ranks on other machines need ZeroMQ in this build and the address to listen on (MessageQueue's
    publisher, ReplyGather's bridge): ImportError / ValueError naming what asked for them."""
    if not getattr(_core, "HAVE_REMOTE", False):
        raise ImportError(f"{what} requested, but this ringcast was built without ZeroMQ (install libzmq3-dev and "
                          "cppzmq-dev and rebuild)")
    if not connect_ip:
        raise ValueError(f"{what} need connect_ip: the address of this machine's interface {peers} reach "
                         f"({listener} binds there only)")


def _aio_refuse(owner: Any, endpoint: Any, what: str) -> None:
    """A blocking call while a ringcast.aio call holds the endpoint (owner._aio_call set): refused,
    unless that call's loop was closed (the endpoint is then taken back). aio is loaded: it set it."""
    from ringcast import aio
    aio.refuse_blocking_call(owner, endpoint, what)
