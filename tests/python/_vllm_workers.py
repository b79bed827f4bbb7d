"""Spawned ranks of the vLLM plug-in's multi-node test (tests/python/test_vllm_plugin.py): one process per
group rank over vLLM's StatelessProcessGroup (the stand-in); the ranks in ``other_node`` pretend to run on
another machine by reporting another machine identity, so they read over ZeroMQ."""
import os
import traceback


def two_node_rank(rank, world_size, port, other_node, standin, results):
    try:
        import sys

        sys.path.insert(0, standin)
        os.environ["VLLM_HOST_IP"] = "127.0.0.1"  # vLLM's own knob: the address to publish on
        import ringcast.vllm as rv
        from vllm.distributed.utils import StatelessProcessGroup

        if rank in other_node:  # what in_the_same_node_as would see for a rank on another machine
            rv._node_key = lambda: ("another-boot-id", 1)
        rv.install()
        from vllm.distributed.device_communicators.shm_broadcast import MessageQueue

        pg = StatelessProcessGroup.create("127.0.0.1", port, rank, world_size)
        # 1. create_from_process_group, writer group rank 0: local readers by shm, the others by ZeroMQ.
        queue = MessageQueue.create_from_process_group(pg, 1 << 16, 4, writer_rank=0)
        kind = "writer" if queue._is_writer else "remote" if queue._is_remote_reader else "local"
        got = []
        for step in range(50):
            payload = {"step": step, "blob": bytes([step]) * (step * 4099)}  # up to 200 KB: fragments too
            got.append(queue.broadcast_object(payload if rank == 0 else None) == payload)
        # 2. create_from_process_group_single_reader: every rank's queue read by global rank 0.
        own, handles = MessageQueue.create_from_process_group_single_reader(pg, 1 << 16, 4, reader_rank=0)
        remote_queues = []
        if rank == 0:
            readers = [MessageQueue.create_from_handle(h, 0) for h in handles]
            for r in readers:
                if r._is_remote_reader:
                    r.wait_until_ready(timeout=30)
                    remote_queues.append(True)
        else:
            own.wait_until_ready(timeout=30)
        pg.barrier()
        own.enqueue(("hello from", rank))
        gathered = [r.dequeue(timeout=30) for r in readers] if rank == 0 else None
        pg.barrier()
        # The store lives in rank 0's process: rank 0 leaves only once every rank has read the
        # barrier's keys (rank 0 may pass the barrier while another still reads them; it then got
        # "Connection reset by peer" from a store that had gone).
        if rank == 0:
            for r in range(1, world_size):
                pg.store.get(f"past_last_barrier/{r}")
        else:
            pg.store.set(f"past_last_barrier/{rank}", b"1")
        results.put((rank, kind, all(got), gathered, len(remote_queues),
                     queue.handle.remote_reader_ranks if rank == 0 else None))
        if rank == 0:
            for r in readers:
                r.shutdown()
        own.shutdown()
        queue.shutdown()
    except BaseException:
        results.put((rank, "error", traceback.format_exc(), None, None, None))
