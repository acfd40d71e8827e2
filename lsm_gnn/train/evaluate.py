"""Accuracy on the validation or test split, with the training fan-outs.

Evaluation reads features straight from the feature rows (memory for the ideal, the feature file
through a plain O_DIRECT store otherwise: `features[ids]`), never through the training cache: it must not disturb the cache state whose
behaviour the run measures, and its time is reported apart from epoch time. `max_nodes` evaluates
a fixed, seeded subset of the split (on 2 CPU cores a whole split can cost more than an epoch);
the record says how many nodes were evaluated. Across ranks each evaluates its share and the
counts are summed.
"""

from __future__ import annotations

import numpy as np
import torch

from lsm_gnn.sampling import NeighborSampler


def eval_subset(dataset, split: str, max_nodes: int | None, seed: int) -> np.ndarray:
    ids = np.asarray(dataset.split(split), dtype=np.int64)
    if max_nodes is not None and len(ids) > max_nodes:
        ids = np.sort(ids[np.random.default_rng([seed, 7]).permutation(len(ids))[:max_nodes]])
    return ids


@torch.no_grad()
def evaluate(model, dataset, features, *, split: str, fanouts, batch_size: int, seed: int = 0,
             max_nodes: int | None = None, device="cpu", rank: int = 0, world_size: int = 1,
             tick=None) -> tuple[float | None, int]:
    """(accuracy, nodes evaluated over all ranks); accuracy None if the split is empty.
    `tick()` is called once per batch (a rank's heartbeat in multi-device runs)."""
    ids = eval_subset(dataset, split, max_nodes, seed)
    mine = ids[rank::world_size]
    correct = total = 0
    was_training = model.training
    model.eval()
    try:
        if len(mine):
            sampler = NeighborSampler(dataset, fanouts, batch_size, seed=seed + 1, shuffle=False,
                                      split=split, seed_ids=mine)
            for mb in sampler.epoch(0):
                if tick is not None:
                    tick()
                x = torch.from_numpy(np.ascontiguousarray(features[mb.input_nodes])).to(device)
                if x.dtype != torch.float32:
                    x = x.float()
                blocks = [b.to(device) for b in mb.blocks]
                pred = model(blocks, x).argmax(1).cpu().numpy()
                correct += int((pred == mb.labels).sum())
                total += len(mb.labels)
    finally:
        model.train(was_training)
    if world_size > 1 and torch.distributed.is_available() and torch.distributed.is_initialized():
        t = torch.tensor([correct, total], dtype=torch.int64)
        if torch.distributed.get_backend() == "nccl":
            t = t.cuda()
        torch.distributed.all_reduce(t)
        correct, total = int(t[0]), int(t[1])
    return (correct / total if total else None), total
