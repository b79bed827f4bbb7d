"""pytest setup: `ringcast` must be importable (PYTHONPATH=<build>/python, as ctest's python_tests sets)."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))  # _workers, for spawned children too (sys.path is passed on)

try:
    import ringcast  # noqa: F401
except ImportError as e:  # a clear message instead of a collection traceback in every file
    raise pytest.UsageError(
        f"cannot import ringcast ({e}); build it and run with PYTHONPATH=<build>/python") from e


@pytest.fixture
def queue_pair():
    """A writer with n local readers (all in this process); everything shut down afterwards."""
    made = []

    def make(n=1, **kw):
        kw.setdefault("max_chunk_bytes", 512 * 1024)
        kw.setdefault("max_chunks", 8)
        q = ringcast.MessageQueue(n, n, **kw)
        rs = [ringcast.MessageQueue.create_from_handle(q.export_handle(), r) for r in q.handle.local_reader_ranks]
        made.append((q, rs))
        return q, rs

    yield make
    for q, rs in made:
        for r in rs:
            r.shutdown()
        q.shutdown()
