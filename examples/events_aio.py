"""asyncio consumer of two ringcast queues (docs/events.md): one loop, no thread per queue.

    PYTHONPATH=<build>/python python3 examples/events_aio.py [--uvloop]

A child process writes 1000 objects to each queue; the loop awaits both with ringcast.aio.
"""
import asyncio
import os
import pickle
import sys

import ringcast
import ringcast.aio as aio

COUNT = 1000


def writer_child():
    """Creates a queue, hands its handle to the parent, writes COUNT objects, shuts down."""
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(rfd)
        q = ringcast.MessageQueue(1, 1)
        os.write(wfd, pickle.dumps(q.export_handle()))
        os.close(wfd)
        q.wait_until_ready(timeout=10)
        for i in range(COUNT):
            q.enqueue({"seq": i}, timeout=10)
        q.shutdown()
        os._exit(0)
    os.close(wfd)
    data = b""
    while chunk := os.read(rfd, 65536):
        data += chunk
    return pid, ringcast.MessageQueue.create_from_handle(pickle.loads(data), 0)


async def consume(name, mq):
    for i in range(COUNT):
        obj = await aio.dequeue(mq, timeout=10)
        assert obj == {"seq": i}, (name, obj, i)
    return name, COUNT


async def main(queues):
    return await asyncio.gather(*(consume(n, q) for n, q in queues))


if __name__ == "__main__":
    children = [writer_child() for _ in range(2)]
    queues = [(f"queue {k}", q) for k, (_, q) in enumerate(children)]
    loop: asyncio.AbstractEventLoop
    if "--uvloop" in sys.argv:
        import uvloop
        loop = uvloop.new_event_loop()
    else:
        loop = asyncio.new_event_loop()
    print(loop.run_until_complete(main(queues)))
    loop.close()
    for pid, q in children:
        os.waitpid(pid, 0)
        q.shutdown()
