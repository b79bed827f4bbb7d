"""multiproc_executor stand-in: vLLM's executor/worker call pattern over shm_broadcast's queues.

The executor makes the broadcast queue, spawns the workers with its handle, takes each worker's
response-queue handle from its ready pipe, and then runs collective_rpc: enqueue one request, dequeue
the replies (with a timeout and the shutdown event as cancel). Each worker loads the general plug-ins
first (vLLM does it when it initialises the worker), joins a torch.distributed gloo group, makes its
group's message-queue broadcaster, attaches to the broadcast queue, makes its response queue, and loops
on dequeue(cancel=..., indefinite=True).
"""
import multiprocessing
import os
import socket
import threading
import time
import traceback
from enum import Enum, auto

from vllm.distributed.device_communicators.shm_broadcast import Handle, MessageQueue  # by name, as vLLM


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class StandInWorker:
    """The methods collective_rpc calls by name (a model runner in vLLM)."""

    def __init__(self, rank, proc):
        self.rank = rank
        self.proc = proc

    def swap_report(self):
        import sys

        import vllm.plugins
        from vllm.distributed.device_communicators import shm_broadcast

        me = sys.modules[__name__]
        return {
            "pid": os.getpid(),
            "plugins": list(vllm.plugins.loaded_names),
            "shm_broadcast.MessageQueue": shm_broadcast.MessageQueue.__module__,
            "shm_broadcast.Handle": shm_broadcast.Handle.__module__,
            "multiproc_executor.MessageQueue": me.MessageQueue.__module__,
            "multiproc_executor.Handle": me.Handle.__module__,
            "rpc_broadcast_mq": type(self.proc.rpc_broadcast_mq).__module__,
            "worker_response_mq": type(self.proc.worker_response_mq).__module__,
            "mq_broadcaster": type(self.proc.group.mq_broadcaster).__module__,
            "rpc_segment": self.proc.rpc_broadcast_mq.handle.name,
        }

    def double(self, tensor):
        return tensor * 2

    def group_broadcast(self, obj):
        # The group's writer (group rank 0) sends obj through the group's queue; the others receive it.
        return self.proc.group.broadcast_object(obj if self.rank == 0 else None)

    def single_reader(self):
        # Every rank writes a queue of its own; group rank 0 reads all of them (vLLM's peer responses).
        queue, handles = self.proc.group.create_single_reader_mq_broadcasters(reader_rank_in_group=0)
        if self.rank == 0:
            readers = [type(queue).create_from_handle(h, 0) for h in handles]
        self.proc.group_barrier()
        queue.enqueue(("hello from", self.rank))
        if self.rank != 0:
            return len(handles)
        return [r.dequeue(timeout=30) for r in readers]

    def stateless_broadcast(self, port, obj):
        from vllm.distributed.device_communicators.shm_broadcast import MessageQueue as Queue
        from vllm.distributed.utils import StatelessProcessGroup

        pg = StatelessProcessGroup.create("127.0.0.1", port, self.rank, self.proc.world_size)
        queue = Queue.create_from_process_group(pg, 1 << 20, 4, writer_rank=1)
        return queue.broadcast_object(obj if self.rank == 1 else None)

    def fail(self):
        raise ValueError("worker asked to fail")


class WorkerProc:
    class ResponseStatus(Enum):
        SUCCESS = auto()
        FAILURE = auto()

    def __init__(self, rank, world_size, init_method, input_shm_handle):
        import torch.distributed as dist

        import vllm.plugins
        from vllm.distributed.parallel_state import GroupCoordinator

        vllm.plugins.load_general_plugins()  # vLLM: WorkerWrapperBase.init_worker
        self.rank = rank
        self.world_size = world_size
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
        dist.init_process_group("gloo", init_method=init_method, rank=rank, world_size=world_size)
        self.group = GroupCoordinator(range(world_size), use_message_queue_broadcaster=True)
        self.rpc_broadcast_mq = MessageQueue.create_from_handle(input_shm_handle, rank)
        self.worker_response_mq = MessageQueue(1, 1)
        self.worker = StandInWorker(rank, self)

    def group_barrier(self):
        import torch.distributed as dist

        dist.barrier(group=self.group.cpu_group)

    @staticmethod
    def worker_main(rank, world_size, init_method, input_shm_handle, ready_writer):
        proc = None
        try:
            proc = WorkerProc(rank, world_size, init_method, input_shm_handle)
            ready_writer.send({"status": "READY", "handle": proc.worker_response_mq.export_handle()})
            proc.rpc_broadcast_mq.wait_until_ready()
            proc.worker_response_mq.wait_until_ready()
        except BaseException:
            ready_writer.send({"status": "FAILED", "error": traceback.format_exc()})
            raise
        finally:
            ready_writer.close()
        proc.busy_loop()

    def busy_loop(self):
        cancel = threading.Event()
        while True:
            method, args, kwargs, output_rank = self.rpc_broadcast_mq.dequeue(cancel=cancel, indefinite=True)
            if method == "__exit__":
                return
            try:
                output = getattr(self.worker, method)(*args, **kwargs)
                status = WorkerProc.ResponseStatus.SUCCESS
            except Exception as e:
                output, status = f"{type(e).__name__}: {e}", WorkerProc.ResponseStatus.FAILURE
            if output_rank is None or self.rank == output_rank:
                self.worker_response_mq.enqueue((status, output))


class MultiprocExecutor:
    def __init__(self, world_size, max_chunk_bytes=1 << 20):
        self.world_size = world_size
        self.shutdown_event = threading.Event()
        self.rpc_broadcast_mq = MessageQueue(world_size, world_size, max_chunk_bytes=max_chunk_bytes)
        handle: Handle = self.rpc_broadcast_mq.export_handle()
        ctx = multiprocessing.get_context("spawn")
        init_method = f"tcp://127.0.0.1:{_free_port()}"
        self.procs, pipes = [], []
        for rank in range(world_size):
            reader, writer = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=WorkerProc.worker_main, args=(rank, world_size, init_method, handle, writer),
                               name=f"VllmWorker-{rank}", daemon=True)
            proc.start()
            writer.close()
            self.procs.append(proc)
            pipes.append(reader)
        self.response_mqs = []
        for rank, pipe in enumerate(pipes):
            if not pipe.poll(120):
                raise TimeoutError(f"worker {rank} did not report ready")
            response = pipe.recv()
            if response["status"] != "READY":
                raise RuntimeError(f"worker {rank} failed to start:\n{response['error']}")
            self.response_mqs.append(MessageQueue.create_from_handle(response["handle"], 0))
        self.rpc_broadcast_mq.wait_until_ready()
        for mq in self.response_mqs:
            mq.wait_until_ready()

    def collective_rpc(self, method, timeout=None, args=(), kwargs=None, unique_reply_rank=None):
        deadline = None if timeout is None else time.monotonic() + timeout
        self.rpc_broadcast_mq.enqueue((method, args, kwargs or {}, unique_reply_rank))
        mqs = [self.response_mqs[unique_reply_rank]] if unique_reply_rank is not None else self.response_mqs
        results = []
        for mq in mqs:
            left = None if deadline is None else deadline - time.monotonic()
            status, result = mq.dequeue(timeout=left, cancel=self.shutdown_event)
            if status != WorkerProc.ResponseStatus.SUCCESS:
                raise RuntimeError(f"Worker failed with error '{result}'")
            results.append(result)
        return results

    def shutdown(self):
        self.shutdown_event.set()
        self.rpc_broadcast_mq.enqueue(("__exit__", (), {}, None), timeout=10)
        for proc in self.procs:
            proc.join(30)
            if proc.is_alive():
                proc.kill()
        self.rpc_broadcast_mq.shutdown()
