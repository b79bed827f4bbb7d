"""pytest setup: `ringcast` must be importable (PYTHONPATH=<build>/python, as ctest's python_tests sets).

Tests that time something carry the marker ``timing`` (set here, see pytest_collection_modifyitems):
ctest's python_tests runs them against the build tree with the cores to itself; python_packaging (the
same compiled sources, installed) runs the others beside other tests, and python_tests_build_tree the
untimed ones only the build tree can run (bindings/python/CMakeLists.txt lists the three parts).
"""
import ast
import functools
import os
import re
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))  # _workers, for spawned children too (sys.path is passed on)

try:
    import ringcast  # noqa: F401
except ImportError as e:  # a clear message instead of a collection traceback in every file
    raise pytest.UsageError(
        f"cannot import ringcast ({e}); build it and run with PYTHONPATH=<build>/python") from e


# What makes a test a timing: a clock it compares (wall or CPU), the GIL probe, the idle-CPU reader, or
# a count of kernel waits (whether a spin caught a wait of a few ms depends on the CPU being free).
_TIMING_CALLS = re.compile(r"\b(monotonic|perf_counter|process_time|thread_time|getrusage|gil_probe|idle_cpu_reader"
                           r"|kernel_waits)\b|\.waits\b")
_TIMING_FIXTURES = {"probe"}  # test_gil.py's GIL probe


@functools.lru_cache(maxsize=None)
def _timing_functions(path: str) -> frozenset:
    """The module's functions that time something, themselves or through another of its functions."""
    with open(path) as f:
        source = f.read()
    bodies = {node.name: ast.get_source_segment(source, node) or ""
              for node in ast.parse(source).body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
    timing = {name for name, body in bodies.items() if _TIMING_CALLS.search(body)}
    while True:  # a test calling a helper that times is a timing too
        grown = {name for name, body in bodies.items() if name not in timing
                 and any(re.search(rf"\b{re.escape(t)}\b", body) for t in timing)}
        if not grown:
            return frozenset(timing)
        timing |= grown


def pytest_configure(config):
    config.addinivalue_line("markers", "timing: asserts on elapsed or CPU time (run without other load)")


def pytest_collection_modifyitems(config, items):
    for item in items:
        fn = getattr(item, "function", None)
        if fn is None:
            continue
        if fn.__name__ in _timing_functions(str(item.path)) or _TIMING_FIXTURES & set(item.fixturenames):
            item.add_marker(pytest.mark.timing)


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
