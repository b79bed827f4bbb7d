"""shm_broadcast stand-in: vLLM's Handle fields; MessageQueue is a tripwire (any use raises)."""
from dataclasses import dataclass, field
from typing import List, Optional, Tuple

TRIPWIRE = "vLLM's own shm_broadcast.MessageQueue was used: ringcast did not replace it in this process"


@dataclass
class Handle:
    local_reader_ranks: List[int] = field(default_factory=list)
    buffer_handle: Optional[Tuple[int, int, int, str]] = None
    local_subscribe_addr: Optional[str] = None
    remote_subscribe_addr: Optional[str] = None
    remote_addr_ipv6: bool = False


class MessageQueue:
    def __init__(self, *args, **kwargs):
        raise AssertionError(TRIPWIRE)

    @staticmethod
    def create_from_handle(handle, rank):
        raise AssertionError(TRIPWIRE)

    @staticmethod
    def create_from_process_group(*args, **kwargs):
        raise AssertionError(TRIPWIRE)

    @staticmethod
    def create_from_process_group_single_reader(*args, **kwargs):
        raise AssertionError(TRIPWIRE)
