"""The GIL is never held while blocked; blocked calls stay interruptible and cancellable."""
import os
import signal
import threading
import time

import pytest

import ringcast
from ringcast import _core


@pytest.fixture
def probe():
    _core.gil_probe_reset()
    yield
    _core._set_release_gil(True)


def fill_ring(q):
    with pytest.raises(TimeoutError):
        for _ in range(1000):
            q.enqueue(b"f" * 8000, timeout=0.02)


def test_probe_sees_no_gil_in_kernel_waits(queue_pair, probe):
    """The main thread's dequeue and enqueue, each checked on its own counts."""
    q, (r,) = queue_pair(1, max_chunk_bytes=16 * 1024, max_chunks=4)
    with pytest.raises(TimeoutError):
        r.dequeue(timeout=0.2)  # blocked reader
    sleeps, with_gil = _core.gil_probe()
    assert sleeps > 0 and with_gil == 0, f"dequeue: {sleeps} sleeps, {with_gil} holding the GIL"
    fill_ring(q)
    _core.gil_probe_reset()
    with pytest.raises(TimeoutError):
        q.enqueue(b"x" * 8000, timeout=0.2)  # blocked writer
    sleeps, with_gil = _core.gil_probe()
    assert sleeps > 0 and with_gil == 0, f"enqueue: {sleeps} sleeps, {with_gil} holding the GIL"


def test_probe_detects_a_held_gil(queue_pair, probe):
    """Negative control: with the release switched off, the same probe must report the GIL held."""
    q, (r,) = queue_pair(1)
    _core._set_release_gil(False)
    with pytest.raises(TimeoutError):
        r.dequeue(timeout=0.1)
    sleeps, with_gil = _core.gil_probe()
    assert sleeps > 0 and with_gil == sleeps


def test_probe_in_other_threads(queue_pair, probe):
    q, rs = queue_pair(2)
    errors = []

    def block(r):
        try:
            r.dequeue(timeout=0.3)
        except TimeoutError:
            pass
        except BaseException as e:
            errors.append(e)

    ts = [threading.Thread(target=block, args=(r,)) for r in rs]
    [t.start() for t in ts]
    [t.join() for t in ts]
    sleeps, with_gil = _core.gil_probe()
    assert not errors and sleeps >= 2 and with_gil == 0


def spin_rate(seconds):
    n = 0
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        for _ in range(1000):
            n += 1
    return n / seconds


def test_main_thread_keeps_its_speed_while_two_threads_are_blocked(queue_pair):
    q, rs = queue_pair(2)
    stop = threading.Event()

    def block(r):
        while not stop.is_set():
            try:
                r.dequeue(timeout=1.0)
            except TimeoutError:
                pass

    # Interleaved solo / loaded windows, the best pair of up to 6 rounds: a 2-core CI machine is shared
    # with other processes, and one preempted window must not decide. Threads that held the GIL while
    # blocked would push every loaded window far below 0.9 (the GIL probe tests above show that
    # deterministically), so stopping at the first round that reaches 0.9 still fails them.
    # Both windows equally long (a shorter one is likelier to catch a fast moment of a shared VM),
    # and the process pinned to one CPU so solo and loaded windows run on the same (v)CPU.
    solo, loaded = [], []
    ratio = 0.0
    saved_affinity = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(saved_affinity)})
    for _ in range(6):
        solo.append(spin_rate(1.0))
        stop.clear()
        ts = [threading.Thread(target=block, args=(r,)) for r in rs]
        [t.start() for t in ts]
        time.sleep(0.05)
        loaded.append(spin_rate(1.0))
        stop.set()
        [t.join() for t in ts]
        # Each loaded window against the solo window just before it: a VM's speed drifts by tens of
        # percent over seconds (a first solo window 40 % faster than every later one made max/max fail
        # with every pair at ~1.0); a thread holding the GIL would pull every pair down.
        ratio = max(lo / so for so, lo in zip(solo, loaded))
        if ratio >= 0.9 and len(loaded) >= 2:
            break
    os.sched_setaffinity(0, saved_affinity)
    assert ratio >= 0.9, (f"main-thread rate with 2 blocked dequeue threads = {ratio:.3f} of solo "
                          f"(solo {[round(x) for x in solo]}, loaded {[round(x) for x in loaded]})")


def await_a_sleep(what):
    """Bounded: the blocked call has gone to sleep (the probe counted it), so the wake is what is tested."""
    end = time.monotonic() + 10
    while _core.gil_probe()[0] == 0:
        assert time.monotonic() < end, f"the blocked {what} never went to sleep within 10 s"
        time.sleep(0.001)


def test_shutdown_wakes_a_blocked_reader(queue_pair, probe):
    q, (r,) = queue_pair(1)
    out = []

    def block():
        t0 = time.monotonic()
        try:
            r.dequeue(timeout=30)
        except BaseException as e:
            out.append((e, time.monotonic() - t0))

    t = threading.Thread(target=block)
    t.start()
    await_a_sleep("dequeue")
    t1 = time.monotonic()
    r.shutdown()
    t.join(timeout=10)
    assert out and isinstance(out[0][0], ringcast.ClosedError)
    assert time.monotonic() - t1 < 1.0


def test_shutdown_wakes_a_blocked_writer(queue_pair, probe):
    q, (r,) = queue_pair(1, max_chunk_bytes=16 * 1024, max_chunks=4)
    fill_ring(q)
    _core.gil_probe_reset()
    out = []

    def block():
        try:
            q.enqueue(b"x" * 8000, timeout=30)
        except BaseException as e:
            out.append(e)

    t = threading.Thread(target=block)
    t.start()
    await_a_sleep("enqueue")
    t1 = time.monotonic()
    q.shutdown()
    t.join(timeout=10)
    assert out and isinstance(out[0], ringcast.ClosedError)
    assert time.monotonic() - t1 < 1.0


def assert_sigint_interrupts(call):
    """SIGINT comes 0.3 s into `call` (sent by another thread to the process, as Ctrl-C is); `call` must
    raise KeyboardInterrupt within 100 ms of it."""
    stamp = []

    def fire():
        time.sleep(0.3)
        stamp.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGINT)

    t = threading.Thread(target=fire)
    t.start()
    with pytest.raises(KeyboardInterrupt):
        call()
    latency = time.monotonic() - stamp[0]
    t.join()
    assert latency < 0.1, f"KeyboardInterrupt after {latency * 1000:.1f} ms"


# Signals reach Python's main thread only; pytest runs tests there (asserted, not skipped: a skip
# condition evaluated at import time, in the main thread, could never be true).
def test_sigint_interrupts_a_blocked_dequeue(queue_pair):
    assert threading.current_thread() is threading.main_thread()
    q, (r,) = queue_pair(1)
    assert_sigint_interrupts(lambda: r.dequeue(timeout=10))
    q.enqueue("still works", timeout=5)
    assert r.dequeue(timeout=5) == "still works"


def test_sigint_interrupts_a_blocked_enqueue(queue_pair):
    assert threading.current_thread() is threading.main_thread()
    q, (r,) = queue_pair(1, max_chunk_bytes=16 * 1024, max_chunks=4)
    fill_ring(q)
    # A multi-record message, interrupted half way.
    assert_sigint_interrupts(lambda: q.enqueue(b"x" * 1_000_000, timeout=10))
    drained = 0
    while True:  # whatever was fully sent before is intact; the half message is withdrawn
        try:
            assert r.dequeue(timeout=0.05) == b"f" * 8000
            drained += 1
        except TimeoutError:
            break
    q.enqueue("after", timeout=5)
    assert r.dequeue(timeout=5) == "after"


def test_sigint_interrupts_a_blocked_collect():
    """The executor's wait for replies: the signal ends the kernel wait itself (the slices are longer
    than the latency asserted here), and the gather works on afterwards."""
    assert threading.current_thread() is threading.main_thread()
    g = ringcast.ReplyGather(2)
    ws = [ringcast.ReplyGather.create_from_handle(g.export_handle(), r) for r in range(2)]
    try:
        assert_sigint_interrupts(lambda: g.collect(1, timeout=10))
        for r, w in enumerate(ws):
            w.reply(1, r)
        assert g.collect(1, timeout=5) == [0, 1]
    finally:
        for w in ws:
            w.close()
        g.close()


def test_an_idle_main_thread_wait_wakes_only_a_few_times_a_second(queue_pair, probe):
    """No signal comes: the blocked main thread wakes only at the end of each slice (and for the
    writer's liveness check), not every 50 ms as when slices were the only way to see Ctrl-C."""
    assert threading.current_thread() is threading.main_thread()
    q, (r,) = queue_pair(1, wait="futex")
    with pytest.raises(TimeoutError):
        r.dequeue(timeout=1.0)
    sleeps, with_gil = _core.gil_probe()
    assert with_gil == 0
    assert 1 <= sleeps <= 6, f"{sleeps} kernel sleeps in one idle second"


def test_sigint_interrupts_a_spinning_dequeue(queue_pair):
    """A wait that never enters the kernel has no sleep for the signal to end: its slices are short."""
    assert threading.current_thread() is threading.main_thread()
    q, (r,) = queue_pair(1, wait="spin")
    assert_sigint_interrupts(lambda: r.dequeue(timeout=10))
