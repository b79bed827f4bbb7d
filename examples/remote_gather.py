# Two processes on loopback stand in for two nodes: the executor (node A) with local worker rank 0,
# and worker rank 1 on "node B", which reaches the executor only over TCP.
import multiprocessing as mp

import ringcast


def node_b_worker(mq_handle, g_handle):
    mq = ringcast.MessageQueue.create_from_handle(mq_handle, 1)    # remote reader rank 1
    g = ringcast.ReplyGather.create_from_handle(g_handle, 1)       # remote worker rank 1
    mq.wait_until_ready(timeout=60)
    g.wait_until_ready(timeout=60)
    while (step := mq.dequeue()) is not None:
        g.reply(step["tag"], {"rank": 1, "sum": sum(step["tokens"])})
    g.close()


if __name__ == "__main__":
    mq = ringcast.MessageQueue(2, 1, local_reader_ranks=[0], connect_ip="127.0.0.1")
    g = ringcast.ReplyGather(2, remote_ranks=[1], connect_ip="127.0.0.1")
    node_b = mp.get_context("spawn").Process(target=node_b_worker, args=(mq.export_handle(), g.export_handle()))
    node_b.start()
    local_reader = ringcast.MessageQueue.create_from_handle(mq.export_handle(), 0)  # local rank 0
    local_worker = ringcast.ReplyGather.create_from_handle(g.export_handle(), 0)
    mq.wait_until_ready(timeout=60)    # every reader attached or connected
    g.wait_until_ready(timeout=60)     # every remote worker connected
    for tag in range(3):
        mq.enqueue({"tag": tag, "tokens": list(range(tag + 3))})
        step = local_reader.dequeue()                      # (in vLLM: another local process)
        local_worker.reply(tag, {"rank": 0, "sum": sum(step["tokens"])})
        print(g.collect(tag, timeout=10))                  # ONE wait: rank 0 (shared memory) and rank 1 (TCP)
    mq.enqueue(None)
    node_b.join(30)
    mq.shutdown()
    g.close()
