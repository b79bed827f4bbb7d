"""vllm.distributed.utils stand-in: StatelessProcessGroup over a torch TCPStore, vLLM's API
(rank, world_size, broadcast_obj, all_gather_obj, barrier, create)."""
import pickle
import time
from dataclasses import dataclass, field
from typing import Any, List

import torch.distributed as dist


@dataclass
class StatelessProcessGroup:
    rank: int
    world_size: int
    store: Any
    broadcast_send_counter: int = 0
    broadcast_recv_counter: dict = field(default_factory=dict)
    all_gather_counter: int = 0

    def broadcast_obj(self, obj: Any, src: int) -> Any:
        if self.rank == src:
            self.store.set(f"broadcast_from/{src}/{self.broadcast_send_counter}", pickle.dumps(obj))
            self.broadcast_send_counter += 1
            return obj
        n = self.broadcast_recv_counter.get(src, 0)
        self.broadcast_recv_counter[src] = n + 1
        return pickle.loads(self.store.get(f"broadcast_from/{src}/{n}"))

    def all_gather_obj(self, obj: Any) -> List[Any]:
        n = self.all_gather_counter
        self.all_gather_counter += 1
        self.store.set(f"all_gather/{n}/{self.rank}", pickle.dumps(obj))
        return [pickle.loads(self.store.get(f"all_gather/{n}/{r}")) for r in range(self.world_size)]

    def barrier(self) -> None:
        self.all_gather_obj(None)

    @staticmethod
    def create(host: str, port: int, rank: int, world_size: int) -> "StatelessProcessGroup":
        store = dist.TCPStore(host_name=host, port=port, world_size=world_size, is_master=(rank == 0),
                              timeout=__import__("datetime").timedelta(seconds=60))
        return StatelessProcessGroup(rank=rank, world_size=world_size, store=store)
