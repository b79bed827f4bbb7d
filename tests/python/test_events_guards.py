"""The event-loop hooks of _core (wake_fd / arm / disarm / check_peers) in a forked child.

An endpoint never crosses a fork: a child that calls a hook on an inherited one is refused, for a
Writer and a GatherCollector as for a Reader, with the Reader's error. An unguarded wake_fd(writer) in
the child registered the child's eventfd as the parent writer's space doorbell: readers then signalled
the child's fd and skipped the futex wake, and the parent's blocked enqueue slept until its next
liveness tick instead of waking at each release.
"""
import os
import threading
import time

import ringcast
from ringcast import _core


def in_forked_child(calls):
    """Runs each (label, call) in a forked child; returns {label: "ExcType: text" or "no error"}. The
    child stays alive (parked) until the returned stop() is called, so that a registration it made
    would still be in place while the parent goes on."""
    rfd, wfd = os.pipe()
    park_r, park_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(rfd)
        os.close(park_w)
        lines = []
        for label, call in calls:
            try:
                call()
                lines.append(f"{label}\tno error")
            except Exception as e:  # noqa: BLE001 - the child reports whatever it got
                lines.append(f"{label}\t{type(e).__name__}: {e}")
        os.write(wfd, ("\n".join(lines) + "\n").encode())
        os.close(wfd)
        os.read(park_r, 1)  # parked until the parent is done
        os._exit(0)
    os.close(wfd)
    os.close(park_r)
    text = b""
    while chunk := os.read(rfd, 65536):
        text += chunk
    os.close(rfd)

    def stop():
        os.close(park_w)
        os.waitpid(pid, 0)
    said = dict(line.split("\t", 1) for line in text.decode().splitlines())
    return said, stop


def test_a_forked_childs_event_loop_hooks_are_refused_as_the_readers_are():
    q = ringcast.MessageQueue(1, 1, max_chunk_bytes=4096, max_chunks=4, liveness_interval=5.0, wait="futex")
    rd = ringcast.MessageQueue.create_from_handle(q.export_handle(), 0)
    q.wait_until_ready(timeout=10)
    g = ringcast.ReplyGather(1)
    w, r, c = q._writer, rd._reader, g._collector
    said, stop = in_forked_child([
        ("reader wake_fd", lambda: _core.wake_fd(r)),
        ("writer wake_fd", lambda: _core.wake_fd(w)),
        ("collector wake_fd", lambda: _core.wake_fd(c)),
        ("reader arm", lambda: _core.arm(r)),
        ("writer arm", lambda: _core.arm(w, 64)),
        ("collector arm", lambda: _core.arm(c, 1)),
        ("writer check_peers", lambda: _core.check_peers(w)),
        ("collector check_peers", lambda: _core.check_peers(c, 1)),
        ("collector arm_pending_collect", lambda: _core.arm_pending_collect(c)),
        ("writer disarm", lambda: _core.disarm(w)),  # the parent's announcement: left alone, not refused
        ("collector disarm", lambda: _core.disarm(c)),
    ])
    try:
        reader_error = said["reader wake_fd"]
        assert reader_error.startswith("RingcastError: wake_fd: ") and "has a copy of it through fork()" in reader_error, said
        for label in ("writer wake_fd", "collector wake_fd"):
            assert said[label] == reader_error, (label, said)
        for label in ("writer arm", "collector arm", "collector arm_pending_collect"):
            assert said[label] == said["reader arm"], (label, said)
        for label in ("writer check_peers", "collector check_peers"):
            assert said[label].startswith("RingcastError: ") and "has a copy of it through fork()" in said[label], (label, said)
        assert said["writer disarm"] == "no error", said
        assert said["collector disarm"] == "no error", said

        # The parent's writer still sleeps on its futex word and is woken by each release: no child's
        # eventfd took its place (the liveness interval is 5 s; a release every 0.3 s).
        payload = b"x" * 3000
        while True:
            try:
                q.enqueue(payload, timeout=0)
            except TimeoutError:
                break

        def drain():
            for _ in range(4):
                time.sleep(0.3)
                rd.dequeue(timeout=5)
        t = threading.Thread(target=drain)
        t.start()
        waited = []
        for _ in range(3):
            t0 = time.monotonic()
            q.enqueue(payload, timeout=10)
            waited.append(time.monotonic() - t0)
        t.join()
        assert max(waited) < 1.5, f"blocked enqueues woke at the liveness tick, not at the release: {waited}"
    finally:
        stop()
    q.shutdown()
    rd.shutdown()
    g.close()


def test_a_forked_childs_reader_disarm_leaves_the_parents_armed_wait_alone():
    """The rank's announcement is the parent's while the parent waits on its eventfd: a child's disarm
    (a finally block's clean-up) withdrew it, and the writer's next publish signalled nobody."""
    import select
    q = ringcast.MessageQueue(1, 1, max_chunk_bytes=4096, max_chunks=4, liveness_interval=5.0)
    rd = ringcast.MessageQueue.create_from_handle(q.export_handle(), 0)
    q.wait_until_ready(timeout=10)
    r = rd._reader
    try:
        fd = _core.wake_fd(r)
        assert _core.arm(r) is False, "nothing published yet: the arm must wait"
        said, stop = in_forked_child([("reader disarm", lambda: _core.disarm(r))])
        try:
            assert said["reader disarm"] == "no error", said
            q.enqueue(b"hello", timeout=5)
            readable, _, _ = select.select([fd], [], [], 2.0)
            assert readable, "the publish did not signal the parent's armed eventfd (its announcement was withdrawn)"
        finally:
            stop()
        _core.disarm(r)
        assert rd.dequeue(timeout=5) == b"hello"
    finally:
        q.shutdown()
        rd.shutdown()
