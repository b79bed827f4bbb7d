#!/usr/bin/env python3
"""A minimal multiprocess executor in the shape users know, built on ringcast.

    executor = Executor(world_size=4)
    executor.collective_rpc("add", args=(1, 2))                          # every rank's answer
    executor.collective_rpc("whoami", unique_reply_rank=0)               # only the output rank replies
    executor.collective_rpc("kv_state", aggregate=True, timeout=5.0)     # all ranks, merged here

Requests go out through one ringcast.MessageQueue (broadcast to every worker); replies come back
through one ringcast.ReplyGather: the executor waits ONCE for all the ranks it needs (one GIL release),
and every request carries a tag, so a late reply to an earlier (timed-out) request raises
StaleReplyError instead of being taken as the answer to the current one.

Run it:  PYTHONPATH=build/python /usr/bin/python3 examples/executor.py
"""

import multiprocessing as mp
import os
from typing import Any, List, Optional, Sequence

import ringcast


class Worker:
    """What runs in each worker process: methods callable by name through collective_rpc."""

    def __init__(self, rank: int):
        self.rank = rank

    def add(self, a, b):
        return a + b

    def whoami(self):
        return {"rank": self.rank, "pid": os.getpid()}

    def kv_state(self):
        return {f"block-{self.rank}-{i}": i for i in range(3)}


def _worker_main(request_handle, reply_handle, rank):
    requests = ringcast.MessageQueue.create_from_handle(request_handle, rank)
    replies = ringcast.ReplyGather.create_from_handle(reply_handle, rank)
    worker = Worker(rank)
    while True:
        try:
            tag, method, args, kwargs, reply_ranks = requests.dequeue()  # blocked: GIL released, 0 % CPU
        except ringcast.ClosedError:
            break
        if reply_ranks is not None and rank not in reply_ranks:
            getattr(worker, method)(*args, **kwargs)
            continue
        try:
            result = ("ok", getattr(worker, method)(*args, **kwargs))
        except Exception as e:  # the executor re-raises it, naming the rank
            result = ("error", f"{type(e).__name__}: {e}")
        replies.reply(tag, result)
    replies.close()


class Executor:
    def __init__(self, world_size: int = 2, start_method: str = "spawn"):
        self.world_size = world_size
        self.requests = ringcast.MessageQueue(world_size, world_size)
        self.replies = ringcast.ReplyGather(world_size)
        ctx: Any = mp.get_context(start_method)  # typed BaseContext, which lacks .Process
        self.procs = [
            ctx.Process(target=_worker_main, args=(self.requests.export_handle(), self.replies.export_handle(), r),
                        daemon=True)
            for r in range(world_size)
        ]
        for p in self.procs:
            p.start()
        self.requests.wait_until_ready(timeout=60)
        self.next_tag = 0

    def collective_rpc(self, method: str, args: Sequence = (), kwargs: Optional[dict] = None,
                       unique_reply_rank: Optional[int] = None, aggregate: bool = False,
                       timeout: Optional[float] = None) -> Any:
        """Runs `method` on every worker. Returns the list of all ranks' results, or only the output
        rank's result when `unique_reply_rank` is set; `aggregate=True` merges dict results."""
        self.next_tag += 1
        tag = self.next_tag
        ranks: List[int] = list(range(self.world_size)) if unique_reply_rank is None else [unique_reply_rank]
        self.requests.enqueue((tag, method, tuple(args), kwargs or {}, ranks), timeout=timeout)
        results = self.replies.collect(tag, ranks, timeout=timeout)  # one wait for every rank needed
        values = []
        for rank, (status, value) in zip(ranks, results):
            if status != "ok":
                raise RuntimeError(f"worker rank {rank}: {value}")
            values.append(value)
        if unique_reply_rank is not None:
            return values[0]
        if aggregate:
            merged = {}
            for v in values:
                merged.update(v)
            return merged
        return values

    def shutdown(self):
        self.requests.shutdown()  # workers drain, then see ClosedError and exit
        for p in self.procs:
            p.join(30)
        self.replies.close()


if __name__ == "__main__":
    ex = Executor(world_size=4)
    try:
        print("add       ->", ex.collective_rpc("add", args=(1, 2)))
        print("whoami[0] ->", ex.collective_rpc("whoami", unique_reply_rank=0))
        print("kv_state  ->", ex.collective_rpc("kv_state", aggregate=True, timeout=5.0))
    finally:
        ex.shutdown()
