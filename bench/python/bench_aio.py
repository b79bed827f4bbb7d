"""asyncio round trips: MessageQueue.enqueue_async / dequeue_async awaited on the loop (ringcast.aio) vs
their floor, a bare eventfd ping-pong through loop.add_reader, measured in the same run, alternated,
every run printed.

    PYTHONPATH=<build>/python python3 bench/python/bench_aio.py [--trips 5000] [--runs 3] [--uvloop]

Both sides are asyncio loops in two processes (fork). Target: ringcast / floor <= 1.5 (p50).
"""
import argparse
import asyncio
import os
import pickle
import statistics
import time

import ringcast


def new_loop(use_uvloop):
    if use_uvloop:
        import uvloop
        return uvloop.new_event_loop()
    return asyncio.new_event_loop()


def floor_side(efd_in, efd_out, trips, starter, use_uvloop):
    """Bare eventfd ping-pong on the loop: add_reader once, a future per message."""
    loop = new_loop(use_uvloop)
    rtts = []

    async def main():
        waiter = [None]

        def readable():
            try:
                os.eventfd_read(efd_in)
            except BlockingIOError:
                return
            if waiter[0] is not None and not waiter[0].done():
                waiter[0].set_result(None)

        loop.add_reader(efd_in, readable)
        for _ in range(trips):
            t0 = time.perf_counter()
            waiter[0] = loop.create_future()
            if starter:
                os.eventfd_write(efd_out, 1)
            await waiter[0]
            if not starter:
                os.eventfd_write(efd_out, 1)
            rtts.append(time.perf_counter() - t0)
        loop.remove_reader(efd_in)

    loop.run_until_complete(main())
    loop.close()
    return statistics.median(rtts)


def floor_run(trips, use_uvloop):
    a = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
    b = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
    pid = os.fork()
    if pid == 0:
        floor_side(a, b, trips, False, use_uvloop)
        os._exit(0)
    p50 = floor_side(b, a, trips, True, use_uvloop)
    os.waitpid(pid, 0)
    os.close(a)
    os.close(b)
    return p50


def ringcast_run(trips, use_uvloop):
    """Each process writes its own queue and reads the other's (endpoints never cross a fork: the
    child makes its writer itself and hands the handle back through a pipe)."""
    ping = ringcast.MessageQueue(1, 1, max_chunk_bytes=4096, max_chunks=8)
    hp = ping.export_handle()
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(rfd)
        pong = ringcast.MessageQueue(1, 1, max_chunk_bytes=4096, max_chunks=8)
        os.write(wfd, pickle.dumps(pong.export_handle()))
        os.close(wfd)
        inbox = ringcast.MessageQueue.create_from_handle(hp, 0)
        loop = new_loop(use_uvloop)

        async def echo():
            for _ in range(trips):
                m = await inbox.dequeue_async(timeout=10)
                await pong.enqueue_async(m, timeout=10)

        loop.run_until_complete(echo())
        loop.close()
        time.sleep(0.05)  # the parent's last dequeue before the name goes
        os._exit(0)
    os.close(wfd)
    data = b""
    while chunk := os.read(rfd, 65536):
        data += chunk
    os.close(rfd)
    inbox = ringcast.MessageQueue.create_from_handle(pickle.loads(data), 0)
    loop = new_loop(use_uvloop)
    rtts = []

    async def main():
        for i in range(trips):
            t0 = time.perf_counter()
            await ping.enqueue_async(i, timeout=10)
            assert await inbox.dequeue_async(timeout=10) == i
            rtts.append(time.perf_counter() - t0)

    loop.run_until_complete(main())
    loop.close()
    os.waitpid(pid, 0)
    inbox.shutdown()
    ping.shutdown()
    return statistics.median(rtts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trips", type=int, default=5000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--uvloop", action="store_true")
    a = ap.parse_args()
    f, r = [], []
    for _ in range(a.runs):
        f.append(floor_run(a.trips, a.uvloop) * 1e6)
        r.append(ringcast_run(a.trips, a.uvloop) * 1e6)
    loop_name = "uvloop" if a.uvloop else "asyncio default loop"
    print(f"asyncio round trips, {loop_name}, {a.trips} trips x {a.runs} runs (alternated), p50 us per run; "
          f"{os.cpu_count()} cores")
    print(f"floor: eventfd + loop.add_reader ping-pong  {' '.join(f'{x:.1f}' for x in f)}")
    print(f"ringcast enqueue_async / dequeue_async      {' '.join(f'{x:.1f}' for x in r)}")
    ratio = statistics.median(r) / statistics.median(f)
    print(f"ratio ringcast / floor (medians): {ratio:.2f} (target <= 1.5: {'met' if ratio <= 1.5 else 'MISSED'})")


if __name__ == "__main__":
    main()
