"""help(ringcast) is complete: every public class, function, method and property has a real docstring,
and the facts a new user needs are in it."""
import dataclasses
import inspect
import pydoc
import re
import types

import pytest

import ringcast
from ringcast import _core


def public_names(module):
    return sorted(n for n in dir(module) if not n.startswith("_")
                  and not isinstance(getattr(module, n), types.ModuleType))


def own_doc(obj):
    """The object's own docstring: no inheritance, no pydoc fallback to the comment above it."""
    if isinstance(obj, (staticmethod, classmethod)):
        obj = obj.__func__
    if isinstance(obj, types.MemberDescriptorType):  # a __slots__ entry: documented in a __slots__ dict
        return inspect.getdoc(obj)
    return obj.__doc__


def flat(doc):
    """The docstring with its line breaks and indentation folded into single spaces."""
    return " ".join(doc.split())


def check_doc(where, doc, *, signature_line=False):
    assert isinstance(doc, str) and doc.strip(), f"{where}: no docstring"
    text = doc.strip()
    if signature_line:  # pybind11 puts the signature first: the text after it must not be empty
        text = text.split("\n", 1)[1].strip() if "\n" in text else ""
        assert text, f"{where}: only pybind11's signature, no docstring"
    assert not re.match(r"#|-{3,}", text), f"{where}: the docstring is a code comment: {text[:60]!r}"
    return text


def documented_members(cls):
    """(name, member) of everything public the class itself defines that can carry a docstring."""
    for name, member in vars(cls).items():
        if name.startswith("_"):
            continue
        if isinstance(member, (types.FunctionType, staticmethod, classmethod, property,
                               types.MemberDescriptorType, types.BuiltinFunctionType)) \
                or type(member).__name__ in ("instancemethod", "builtin_function_or_method"):
            yield name, member


PUBLIC = public_names(ringcast)
CLASSES = [n for n in PUBLIC if inspect.isclass(getattr(ringcast, n))]


def test_all_lists_every_public_name():
    assert sorted(ringcast.__all__) == PUBLIC
    assert set(CLASSES) >= {"MessageQueue", "Handle", "ReplyGather", "GatherHandle", "PendingReplies",
                            "RingcastError", "ClosedError", "PeerDeadError", "StaleReplyError"}


def test_module_docstring():
    doc = flat(check_doc("ringcast", ringcast.__doc__))
    for fact in ("None waits forever", "0 polls", "GIL", "TimeoutError", "PeerDeadError", "liveness",
                 "releases its rank", "spin_us", "spin_max_us", "OOB_THRESHOLD"):
        assert fact in doc, f"ringcast's docstring does not mention {fact!r}"


@pytest.mark.parametrize("name", CLASSES)
def test_every_public_class_method_and_property_has_a_docstring(name):
    cls = getattr(ringcast, name)
    doc = check_doc(name, own_doc(cls))
    assert not doc.startswith(name + "("), f"{name}: only the dataclass-generated signature"
    for member_name, member in documented_members(cls):
        check_doc(f"{name}.{member_name}", own_doc(member))


@pytest.mark.parametrize("cls", [ringcast.Handle, ringcast.GatherHandle])
def test_every_dataclass_field_is_documented(cls):
    doc = cls.__doc__
    section = doc.split("Attributes:", 1)[1]
    for f in dataclasses.fields(cls):
        assert re.search(rf"^\s+{f.name}:", section, re.M), f"{cls.__name__}.{f.name} is not documented"


def test_pydoc_shows_no_code_comment():
    """pydoc falls back to the comment above an undocumented def (export_handle showed a '# ----' line)."""
    assert not pydoc.getdoc(ringcast.MessageQueue.export_handle).startswith("#")
    for obj in (ringcast, ringcast.MessageQueue, ringcast.ReplyGather, ringcast.PendingReplies, _core):
        text = pydoc.render_doc(obj, renderer=pydoc.plaintext)
        assert "# ----" not in text, f"help({obj.__name__}) shows a code comment"


def test_message_queue_facts():
    doc = flat(ringcast.MessageQueue.__doc__)
    for fact in ("n_reader", "n_local_reader", "local_reader_ranks", "connect_ip", "oob_threshold",
                 "liveness_interval", "liveness_s", "'hybrid'", "'futex'", "'spin'", "'spin_yield'",
                 "spin_us", "spin_max_us", "None waits forever", "0 polls", "GIL", "PeerDeadError",
                 "two intervals", "releases its rank", "never waits", "RuntimeError", "Raises:"):
        assert fact in doc, f"MessageQueue's docstring does not mention {fact!r}"
    # How max_chunk_bytes and max_chunks size the ring.
    assert re.search(r"max_chunk_bytes \* max_chunks", doc)
    assert "power of two" in doc and "does not cap a message" in doc


BLOCKING = [
    (ringcast.MessageQueue, "wait_until_ready"),
    (ringcast.MessageQueue, "enqueue"),
    (ringcast.MessageQueue, "dequeue"),
    (ringcast.MessageQueue, "dequeue_many"),
    (ringcast.MessageQueue, "broadcast_object"),
    (ringcast.MessageQueue, "acquire_write"),
    (ringcast.MessageQueue, "acquire_read"),
    (ringcast.ReplyGather, "reply"),
    (ringcast.ReplyGather, "collect"),
    (ringcast.ReplyGather, "collect_async"),
    (ringcast.PendingReplies, "result"),
]


@pytest.mark.parametrize("cls,name", BLOCKING, ids=[f"{c.__name__}.{n}" for c, n in BLOCKING])
def test_blocking_methods_document_their_errors(cls, name):
    doc = flat(getattr(cls, name).__doc__)
    assert "TimeoutError" in doc
    assert "Raises:" in doc or "raises" in doc.lower()
    if name in ("enqueue", "dequeue", "collect", "reply"):
        assert "ClosedError" in doc and "PeerDeadError" in doc
        assert "None (default) waits forever" in doc and "0 " in doc


def test_reply_gather_facts():
    doc = flat(ringcast.ReplyGather.__doc__)
    for fact in ("tag", "One wait for all ranks", "StaleReplyError", "liveness_interval", "futex_waitv",
                 "max_reply_bytes", "mode"):
        assert fact in doc, f"ReplyGather's docstring does not mention {fact!r}"
    collect = flat(ringcast.ReplyGather.collect.__doc__)
    assert "StaleReplyError" in collect and "kept for the next collect of the same tag" in collect
    assert "PeerDeadError" in collect and "ClosedError" in collect
    assert "PendingReplies" in ringcast.ReplyGather.collect_async.__doc__
    assert "timeout" in flat(ringcast.PendingReplies.result.__doc__)


def test_exception_docs():
    assert "two intervals" in flat(ringcast.PeerDeadError.__doc__)
    assert "kept for the next collect of the same tag" in flat(ringcast.StaleReplyError.__doc__)
    assert "every message sent before has been read" in flat(ringcast.ClosedError.__doc__)
    for exc in (ringcast.ClosedError, ringcast.PeerDeadError, ringcast.StaleReplyError):
        assert issubclass(exc, ringcast.RingcastError) and exc.__name__ in ringcast.RingcastError.__doc__


CORE_CLASSES = [n for n in public_names(_core) if inspect.isclass(getattr(_core, n))
                and not issubclass(getattr(_core, n), BaseException)]


def test_core_functions_have_docstrings():
    for name in public_names(_core):
        obj = getattr(_core, name)
        if callable(obj) and not inspect.isclass(obj):
            check_doc(f"_core.{name}", obj.__doc__, signature_line=True)
    check_doc("ringcast._core", _core.__doc__)


@pytest.mark.parametrize("name", CORE_CLASSES)
def test_core_classes_have_docstrings(name):
    cls = getattr(_core, name)
    check_doc(f"_core.{name}", cls.__doc__)
    check_doc(f"_core.{name}.__init__", cls.__init__.__doc__, signature_line=True)
    for member_name, member in documented_members(cls):
        check_doc(f"_core.{name}.{member_name}", member.__doc__, signature_line=not isinstance(member, property))
