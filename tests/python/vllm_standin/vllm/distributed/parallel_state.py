"""parallel_state stand-in: GroupCoordinator's message-queue broadcasters, which import MessageQueue
inside the method, as vLLM's do."""
import torch.distributed as dist


class GroupCoordinator:
    def __init__(self, ranks, use_message_queue_broadcaster=False):
        self.ranks = list(ranks)
        self.cpu_group = dist.new_group(self.ranks, backend="gloo")
        self.rank = dist.get_rank()
        self.rank_in_group = self.ranks.index(self.rank)
        self.world_size = len(self.ranks)
        self.mq_broadcaster = None
        if use_message_queue_broadcaster and self.world_size > 1:
            from vllm.distributed.device_communicators.shm_broadcast import MessageQueue

            self.mq_broadcaster = MessageQueue.create_from_process_group(self.cpu_group, 1 << 22, 6)

    def create_mq_broadcaster(self, writer_rank=0, external_writer_handle=None, blocking=True):
        from vllm.distributed.device_communicators.shm_broadcast import MessageQueue

        return MessageQueue.create_from_process_group(self.cpu_group, 1 << 22, 6, writer_rank=writer_rank,
                                                      external_writer_handle=external_writer_handle,
                                                      blocking=blocking)

    def create_single_reader_mq_broadcasters(self, reader_rank_in_group=0, blocking=False):
        from vllm.distributed.device_communicators.shm_broadcast import MessageQueue

        return MessageQueue.create_from_process_group_single_reader(self.cpu_group, 1 << 22, 6,
                                                                    reader_rank=self.ranks[reader_rank_in_group],
                                                                    blocking=blocking)

    def broadcast_object(self, obj=None, src=0):
        return self.mq_broadcaster.broadcast_object(obj)
