"""The gradient synchronisation of data-parallel ranks, timed as a stage of its own (`sync`).

DDP all-reduces the gradients inside `loss.backward()`, so a step's time would count the wait for
the slowest peer as the accelerator's (`train`), and `bound_stage` would blame the accelerator for
a rank that sampled or fetched slower. Here the backward runs under DDP's `no_sync()` (gradients
stay local) and `allreduce_gradients` then averages them in one all-reduce, which the caller times
as `sync`: the wait for the peers plus the transfer. DDP would not overlap that all-reduce with the
backward anyway for the models here: its default bucket is 25 MiB and GraphSAGE's gradient is
2.1 MB, one bucket, reduced only when the whole backward is done. The sum is DDP's: every
parameter's gradient averaged over the ranks (a parameter without a gradient counts as zeros on
that rank, as DDP's bucket does).

With an emulated accelerator nothing is trained: `meet` all-reduces one number, so the ranks keep
the rhythm of a step that ends in a gradient all-reduce, and its time is the waiting on the peers.
"""

from __future__ import annotations

import torch


def allreduce_gradients(parameters, world_size: int) -> int:
    """Average the gradients of `parameters` over the ranks of the default process group in one
    all-reduce of their concatenation; returns the bytes reduced."""
    params = [p for p in parameters if p.requires_grad]
    if not params:
        return 0
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
    flat = torch.cat([g.reshape(-1) for g in grads])
    torch.distributed.all_reduce(flat)
    flat /= world_size
    offset = 0
    for p, g in zip(params, grads):
        n = g.numel()
        if p.grad is None:
            p.grad = g
        p.grad.copy_(flat[offset:offset + n].view_as(g))
        offset += n
    return flat.numel() * flat.element_size()


class Meeting:
    """The emulated ranks' meeting point at the end of a step: one all-reduce of one number."""

    def __init__(self):
        self.token = torch.zeros(1)

    def __call__(self) -> None:
        torch.distributed.all_reduce(self.token)
