"""asyncio and ringcast (docs/events.md): one loop, no thread, every await on the loop's own fd watching.

    PYTHONPATH=<build>/python python3 examples/events_aio.py [--uvloop]

* two queues written by child processes, consumed with ``await mq.dequeue_async()`` (every 100th
  object carries 1 MiB: more than a record of these rings, it crosses record by record);
* a queue this loop writes with ``await mq.enqueue_async(obj)`` (it waits for room on the loop), read by
  a child process;
* a gather group of two worker ranks in a child process, collected with ``await gather.collect_async(tag)``.
"""
import asyncio
import os
import pickle
import sys

import ringcast

COUNT = 1000
BIG = 1 << 20

def small_ring_queue() -> ringcast.MessageQueue:
    """A writer with a 512 KiB ring: its largest record is 128 KiB, so a 1 MiB object spans 8 records."""
    return ringcast.MessageQueue(1, 1, max_chunk_bytes=64 * 1024, max_chunks=4)


def item(i):
    return {"seq": i, "blob": bytes(BIG) if i % 100 == 0 else b""}


def child(body):
    """Forks a child that runs body(send), where send(obj) hands obj to the parent (a pipe); returns
    (pid, what the child sent)."""
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(rfd)

        def send(obj):
            os.write(wfd, pickle.dumps(obj))
            os.close(wfd)

        code = 0
        try:
            body(send)
        except BaseException as e:  # noqa: BLE001 - any failure: a non-zero exit
            print(f"child: {e!r}", file=sys.stderr)
            code = 1
        os._exit(code)
    os.close(wfd)
    data = b""
    while chunk := os.read(rfd, 65536):
        data += chunk
    os.close(rfd)
    return pid, pickle.loads(data)


def writer(send):
    q = small_ring_queue()
    send(q.export_handle())
    q.wait_until_ready(timeout=10)
    for i in range(COUNT):
        q.enqueue(item(i), timeout=10)
    q.shutdown()


def workers(handle):
    def body(send):
        ranks = [ringcast.ReplyGather.create_from_handle(handle, r) for r in range(2)]
        send(None)
        for tag in range(3):
            for rank, w in enumerate(ranks):
                w.reply(tag, {"tag": tag, "rank": rank})
    return body


def reader(handle):
    def body(send):
        mq = ringcast.MessageQueue.create_from_handle(handle, 0)
        send(None)
        for i in range(COUNT):
            assert mq.dequeue(timeout=10) == item(i)
    return body


async def consume(name, mq):
    for i in range(COUNT):
        obj = await mq.dequeue_async(timeout=10)  # timeout=None: forever; TimeoutError after timeout s
        assert obj == item(i), (name, obj["seq"], i)
    return name, COUNT


async def produce(mq):
    for i in range(COUNT):
        await mq.enqueue_async(item(i), timeout=10)  # awaits room; a large object goes record by record
    return "sent", COUNT


async def collect(gather):
    return [await gather.collect_async(tag, timeout=10) for tag in range(3)]  # a PendingReplies, awaited


async def main(queues, out, gather):
    return await asyncio.gather(*(consume(n, q) for n, q in queues), produce(out), collect(gather))


if __name__ == "__main__":
    pids, queues = [], []
    for k in range(2):
        pid, handle = child(writer)
        pids.append(pid)
        queues.append((f"queue {k}", ringcast.MessageQueue.create_from_handle(handle, 0)))
    out = small_ring_queue()
    pids.append(child(reader(out.export_handle()))[0])
    gather = ringcast.ReplyGather(2)
    pids.append(child(workers(gather.export_handle()))[0])
    loop: asyncio.AbstractEventLoop
    if "--uvloop" in sys.argv:
        import uvloop
        loop = uvloop.new_event_loop()
    else:
        loop = asyncio.new_event_loop()
    results = loop.run_until_complete(main(queues, out, gather))
    loop.close()
    print(results[:3])
    print(results[3])
    codes = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in pids]
    print("children exited with", codes)
    sys.exit(0 if codes == [0] * len(pids) else 1)
