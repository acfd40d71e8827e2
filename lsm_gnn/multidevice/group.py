"""The process group of a multi-device run: rendezvous port, backend, the exchange's own group.

gloo on the CPU, NCCL when `train.device=cuda`, CUDA is present and every rank of this host has a GPU
of its own (`distributed.backend: auto`; gloo with more ranks than GPUs).
The process-group timeout (`distributed.timeout_s`) bounds every collective, so no rank blocks
forever, with or without the launcher watching it.
"""

from __future__ import annotations

import datetime
import os
import socket

from lsm_gnn.config import DistributedConfig


def pick_free_port(addr: str = "127.0.0.1") -> int:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((addr, 0))
            return s.getsockname()[1]
    except OSError as e:  # an address that does not resolve or is not this machine's: before any rank starts
        from lsm_gnn.utils.errors import DistributedError

        raise DistributedError(None, f"distributed.master_addr {addr!r}: cannot listen there ({e})") from None


def resolve_backend(distributed: DistributedConfig, device: str) -> str:
    """The backend of `distributed.backend` (auto: NCCL when the run trains on `device` cuda, CUDA
    is present and this host has a GPU for each of its ranks, else gloo)."""
    b = distributed.backend
    if b != "auto":
        return b
    import torch

    if device != "cuda" or not torch.cuda.is_available():
        return "gloo"
    # NCCL refuses two ranks on one GPU ("Duplicate GPU detected"): with more ranks on this host
    # than GPUs (a workflow's 2-device runs on a one-GPU machine) the ranks train on cuda:0 and
    # exchange through gloo, as `lsm-gnn check gpu`'s multidevice step does. torchrun says how many
    # ranks share the host (LOCAL_WORLD_SIZE); the launcher puts all of distributed.devices on it.
    local_ranks = int(os.environ.get("LOCAL_WORLD_SIZE", distributed.devices))
    return "nccl" if local_ranks <= torch.cuda.device_count() else "gloo"


def init_process_group(distributed: DistributedConfig, device: str, rank: int, world_size: int,
                       init_method: str | None = None):
    """Join the default process group (the run's `distributed` section, training on `device`)."""
    import torch
    import torch.distributed as dist

    backend = resolve_backend(distributed, device)
    timeout = datetime.timedelta(seconds=distributed.timeout_s)
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)) % torch.cuda.device_count())
    dist.init_process_group(backend, init_method=init_method or "env://", rank=rank,
                            world_size=world_size, timeout=timeout)
    return backend


def exchange_group(distributed: DistributedConfig, device: str):
    """A process group of its own for the exchange (every rank must call this, in the same order).

    The loader may fetch batch t+1 in a thread while DDP all-reduces batch t's gradients on the
    default group; collectives of two threads on one group could interleave differently on
    different ranks, so the exchange never shares the default group.
    """
    import torch.distributed as dist

    if not dist.is_initialized():
        return None
    return dist.new_group(backend=resolve_backend(distributed, device),
                          timeout=datetime.timedelta(seconds=distributed.timeout_s))
