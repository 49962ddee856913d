"""The torch.distributed process group as the library reads it (tmm.train,
tmm.data's loader): the one place that asks for this process's rank. The
group itself is the caller's (``torch.distributed.init_process_group``, e.g.
under torchrun)."""

__all__ = ["rank_and_world_size"]


def rank_and_world_size():
    """(rank, world size) of an initialised torch.distributed group, else (0, 1)."""
    import torch.distributed as dist  # only when asked: most runs are one process

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1
