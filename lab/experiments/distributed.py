"""Process-group set-up for drivers run under torchrun (WORLD_SIZE > 1):
gloo on the CPU, NCCL with CUDA (one GPU per process, LOCAL_RANK's)."""
from __future__ import annotations

import os

import torch

from .errors import SettingsError

__all__ = ["init", "broadcast", "shutdown", "local_threads"]


def init(device: str):
    """(rank, world size, torch.device): a process group under torchrun,
    else (0, 1, device)."""
    import torch.distributed as dist

    world = int(os.environ.get("WORLD_SIZE", "1"))
    if device == "cuda":
        if not torch.cuda.is_available():
            raise SettingsError("--device cuda, but torch sees no CUDA device")
        dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(dev)
    else:
        dev = torch.device("cpu")
    if world <= 1:
        return 0, 1, dev
    if not dist.is_initialized():
        dist.init_process_group("nccl" if dev.type == "cuda" else "gloo")
    return dist.get_rank(), dist.get_world_size(), dev


def broadcast(obj, world):
    """Rank 0's ``obj`` on every rank (what rank 0 alone decided: folder, steps)."""
    if world <= 1:
        return obj
    import torch.distributed as dist

    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def shutdown():
    """Ends the process group, if there is one."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def local_threads() -> int:
    """The CPUs divided among the processes of this machine (torchrun's LOCAL_WORLD_SIZE)."""
    local = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    return max(1, (os.cpu_count() or 1) // max(local, 1))
