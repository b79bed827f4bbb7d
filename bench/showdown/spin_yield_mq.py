"""Variant (a) of the executor showdown: today's common design, written here as an honest baseline.

Modelled on the shared-memory broadcast queue that multiprocess executors commonly use (vLLM's
shm_broadcast ShmRingBuffer/MessageQueue, as described in ringcast's brief): a ring of `max_chunks`
fixed-size chunks in one shared-memory block; each chunk has a metadata row
``[written, read_by_0, ..., read_by_{n-1}]``; the writer waits for a chunk that every reader has read,
readers wait for a chunk that is written and unread by them. Both wait by polling in Python with
``os.sched_yield()`` between polls, holding the GIL whenever they are not inside sched_yield. Replies
go through one such queue per worker (one reader: the executor), read rank by rank.

Python stores to shared memory are plain stores; on x86 (TSO) the data-before-flag order holds, which
is all this design relies on (as does the design it models).
"""

import os
import pickle
import struct
import time
from multiprocessing import shared_memory

_LEN = struct.Struct("<Q")


class SpinYieldQueue:
    def __init__(self, n_reader: int, max_chunk_bytes: int = 1 << 20, max_chunks: int = 10, name=None):
        self.n_reader = n_reader
        self.max_chunk_bytes = max_chunk_bytes
        self.max_chunks = max_chunks
        self.meta_row = 1 + n_reader
        self.data_bytes = max_chunk_bytes * max_chunks
        size = self.data_bytes + self.meta_row * max_chunks
        if name is None:
            self.shm = shared_memory.SharedMemory(create=True, size=size)
            self.shm.buf[self.data_bytes:size] = bytes(size - self.data_bytes)
            self.owner = True
        else:
            self.shm = shared_memory.SharedMemory(name=name)
            self.owner = False
        self.buf = self.shm.buf
        self.current_idx = 0
        self.rank = None  # None: writer

    def handle(self):
        return (self.n_reader, self.max_chunk_bytes, self.max_chunks, self.shm.name)

    @classmethod
    def attach(cls, handle, rank):
        q = cls(*handle[:3], name=handle[3])
        q.rank = rank
        return q

    def _meta(self, idx):
        return self.data_bytes + idx * self.meta_row

    def enqueue(self, obj, timeout=None):
        data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        if len(data) + _LEN.size > self.max_chunk_bytes:
            raise ValueError("object larger than a chunk (the baseline needs an overflow side channel)")
        meta = self._meta(self.current_idx)
        deadline = None if timeout is None else time.monotonic() + timeout
        buf = self.buf
        while True:
            written = buf[meta]
            read_count = sum(buf[meta + 1 : meta + 1 + self.n_reader])
            if written and read_count != self.n_reader:
                os.sched_yield()  # the chunk is still unread by someone: poll again
                if deadline is not None and time.monotonic() > deadline:
                    raise TimeoutError
                continue
            start = self.current_idx * self.max_chunk_bytes
            buf[start : start + _LEN.size] = _LEN.pack(len(data))
            buf[start + _LEN.size : start + _LEN.size + len(data)] = data
            buf[meta + 1 : meta + 1 + self.n_reader] = bytes(self.n_reader)
            buf[meta] = 1  # publish after the data
            break
        self.current_idx = (self.current_idx + 1) % self.max_chunks

    def dequeue(self, timeout=None):
        meta = self._meta(self.current_idx)
        flag = meta + 1 + self.rank
        deadline = None if timeout is None else time.monotonic() + timeout
        buf = self.buf
        while True:
            if not buf[meta] or buf[flag]:
                os.sched_yield()  # nothing new for me: poll again
                if deadline is not None and time.monotonic() > deadline:
                    raise TimeoutError
                continue
            start = self.current_idx * self.max_chunk_bytes
            (n,) = _LEN.unpack_from(buf, start)
            obj = pickle.loads(buf[start + _LEN.size : start + _LEN.size + n])
            buf[flag] = 1
            break
        self.current_idx = (self.current_idx + 1) % self.max_chunks
        return obj

    def close(self):
        self.buf = None
        self.shm.close()
        if self.owner:
            self.shm.unlink()
