"""One process's place in a torchrun job and its device: the single set-up that pretraining
(pretrain, finetune) and the tools (embed, similar, probe) share.

Without torchrun (no WORLD_SIZE, or 1) this is rank 0 of 1 and nothing is initialized. Under
torchrun the default process group is initialized once: NCCL when the process uses a GPU (the
one of its LOCAL_RANK), else gloo.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from .constants import DEFAULT_DEVICE, DEVICES


def pick_device(device: str = DEFAULT_DEVICE, index: int = 0) -> torch.device:
    """ "auto" (CUDA when available), "cpu" or "cuda" → a torch device (CUDA device `index`)."""
    if device not in DEVICES:
        raise ValueError(f"device: expected one of {', '.join(DEVICES)}, found {device!r}")
    use_cuda = torch.cuda.is_available() if device == "auto" else device == "cuda"
    if use_cuda and not torch.cuda.is_available():
        raise ValueError("device 'cuda' asked for, but no CUDA device is available")
    return torch.device("cuda", index) if use_cuda else torch.device("cpu")


@dataclass
class Distributed:
    """This process's rank, the number of processes, and the device it computes on."""

    rank: int = 0
    world_size: int = 1
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))

    @classmethod
    def from_env(cls, device: str = DEFAULT_DEVICE) -> Distributed:
        """Reads torchrun's environment, picks the device ("auto": CUDA when available) and joins the group."""
        world = int(os.environ.get("WORLD_SIZE", "1"))
        dev = pick_device(device, int(os.environ.get("LOCAL_RANK", "0")))
        use_cuda = dev.type == "cuda"
        if use_cuda:
            torch.cuda.set_device(dev)
        if world > 1 and not dist.is_initialized():
            dist.init_process_group("nccl" if use_cuda else "gloo")
        rank = dist.get_rank() if world > 1 else 0
        return cls(rank, world, dev)

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def sum(self, tensor: torch.Tensor) -> torch.Tensor:
        """`tensor` summed over every process, in place (on this process's device)."""
        if self.world_size > 1:
            dist.all_reduce(tensor)
        return tensor

    def gather(self, tensor: torch.Tensor) -> torch.Tensor:
        """[world_size, *shape]: `tensor` from every process (same shape everywhere)."""
        if self.world_size == 1:
            return tensor.unsqueeze(0)
        parts = [torch.empty_like(tensor) for _ in range(self.world_size)]
        dist.all_gather(parts, tensor)
        return torch.stack(parts)

    def barrier(self) -> None:
        if self.world_size > 1:
            dist.barrier()

    @staticmethod
    def close() -> None:
        """Leaves the process group (if one was joined), so a later run in this process starts afresh."""
        if dist.is_initialized():
            # gloo's worker thread frees the last collective's work just after completing it, and that takes the
            # GIL (its tensors are Python's); the group's destructor joins the thread while holding the GIL. Right
            # after a collective the two deadlock (torch 2.13: a torchrun rank hung at exit). Sleeping releases the
            # GIL, so the thread is done before the group goes.
            time.sleep(0.05)
            dist.destroy_process_group()


__all__ = ["Distributed", "pick_device"]
