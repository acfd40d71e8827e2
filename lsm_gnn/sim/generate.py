"""Generate the request trace of training epochs with the same sampler and seed as training.

Device d of G draws its mini-batches from `NeighborSampler(..., rank=d, world_size=G)`, exactly
as rank d does in `lsm-gnn train`, so iteration b of the trace holds what every device requests
in iteration b of the real run (the sampler's input nodes: global feature-row ids).
"""

from __future__ import annotations

import itertools
from typing import Callable, Sequence

import numpy as np
from tqdm import tqdm

from lsm_gnn.sim.trace import Trace
from lsm_gnn.utils.errors import InputError

_END = object()


def default_sampler_factory():
    from lsm_gnn.sampling import NeighborSampler

    return NeighborSampler


def generate_trace(dataset, *, fanouts: Sequence[int], batch_size: int, seed: int = 0, epochs: int = 1,
                   devices: int = 1, max_batches: int | None = None, shuffle: bool = True,
                   split: str = "train", sampler_factory: Callable | None = None,
                   progress: bool = True) -> Trace:
    """The trace of `epochs` epochs (each cut to its first `max_batches` iterations if given).

    `sampler_factory(dataset, fanouts, batch_size, seed=, shuffle=, rank=, world_size=, split=)`
    defaults to `lsm_gnn.sampling.NeighborSampler`; tests pass a stand-in.
    """
    if devices < 1 or epochs < 1 or batch_size < 1:
        raise InputError(f"devices, epochs and batch_size must be >= 1, found {devices}, {epochs}, {batch_size}")
    if max_batches is not None and max_batches < 1:
        raise InputError(f"max_batches must be >= 1 or None, found {max_batches}")
    factory = sampler_factory or default_sampler_factory()
    samplers = [factory(dataset, list(fanouts), batch_size, seed=seed, shuffle=shuffle, rank=d,
                        world_size=devices, split=split) for d in range(devices)]
    per_epoch = len(samplers[0])
    planned = min(per_epoch, max_batches) if max_batches else per_epoch
    num_rows = dataset.features().num_rows
    batches: list[list[np.ndarray]] = []
    batches_per_epoch = []
    bar = tqdm(total=planned * epochs, desc="sampling trace", unit="batch", disable=not progress, leave=False)
    for e in range(epochs):
        its = [s.epoch(e) for s in samplers]
        if max_batches:
            its = [itertools.islice(it, max_batches) for it in its]
        count = 0
        for b, mbs in enumerate(itertools.zip_longest(*its, fillvalue=_END)):
            if any(mb is _END for mb in mbs):
                lens = [d for d, mb in enumerate(mbs) if mb is _END]
                raise InputError(f"epoch {e}: devices {lens} ran out of mini-batches at iteration {b}; "
                                 "the sampler must give every rank the same number of batches")
            batches.append([_row_ids(mb.input_nodes, num_rows) for mb in mbs])
            count += 1
            bar.update(1)
        batches_per_epoch.append(count)
    bar.close()
    meta = {"source": "generated", "dataset": getattr(dataset, "name", None),
            "dataset_path": str(getattr(dataset, "root", "")), "fanouts": list(fanouts),
            "batch_size": batch_size, "seed": seed, "shuffle": shuffle, "split": split,
            "epochs": epochs, "batches_per_epoch": batches_per_epoch, "full_epoch_batches": per_epoch,
            "max_batches": max_batches, "sampler": f"{factory.__module__}.{factory.__qualname__}"}
    return Trace(num_devices=devices, num_rows=num_rows, batches=batches, meta=meta)


def _row_ids(ids, num_rows: int) -> np.ndarray:
    ids = np.asarray(ids.numpy() if hasattr(ids, "numpy") else ids).astype(np.int64, copy=False).ravel()
    if ids.size and (ids.min() < 0 or ids.max() >= num_rows):
        raise InputError(f"sampler returned row ids outside [0, {num_rows}): [{ids.min()}, {ids.max()}]")
    return ids
