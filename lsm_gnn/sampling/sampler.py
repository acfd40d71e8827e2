"""Multi-layer uniform neighbour sampling over the dataset's CSC graph, seeded per epoch.

`NeighborSampler(dataset, fanouts, batch_size, ...)`: `epoch(e)` yields `MiniBatch`es whose
`input_nodes` are global feature-row ids (type offset + local id), `seeds` the labelled-type ids
the loss is computed on, `blocks` the index-based blocks (input side first), `labels`.

- `fanouts[i]` is the fan-out of layer i counted from the input (DGL's convention): with
  `[10, 15]` each seed gets 15 neighbours and each of those 10.
- Per epoch the split is permuted with a seeded generator (the same on every rank), then dealt
  to ranks round-robin and cut to an equal length, so every rank runs the same number of batches
  (at most world_size-1 seeds per epoch are left out; the last batch may be short).
- Heterogeneous datasets: every edge type is sampled with the layer's fan-out (in-edges of the
  destination type); a block's source nodes are grouped by node type in feature-file order.
- The sampler is deterministic: the same (seed, epoch, rank, world_size) gives the same batches on
  every run, thread and machine (see `kernels.py`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np
import torch

from lsm_gnn.datasets.format import Dataset
from lsm_gnn.models.blocks import Block
from lsm_gnn.sampling.kernels import batch_key, relabel, sample_layer
from lsm_gnn.utils.errors import DataError, InputError


@dataclass
class MiniBatch:
    input_nodes: np.ndarray      # int64 global feature-row ids, in block[0] source order
    seeds: np.ndarray            # int64 ids of the labelled node type
    blocks: list[Block]          # input side first
    labels: np.ndarray           # int64 class of each seed
    epoch: int = 0
    step: int = 0

    @property
    def num_input(self) -> int:
        return int(self.input_nodes.shape[0])


def deal_seeds(ids: np.ndarray, epoch: int, *, seed: int, shuffle: bool, rank: int, world_size: int) -> np.ndarray:
    """Rank `rank`'s seeds of `epoch`, in batch order: `ids` permuted with a generator seeded by
    (seed, epoch) (the same on every rank), dealt round-robin, cut to len(ids) // world_size."""
    if shuffle:
        ids = ids[np.random.default_rng([seed, epoch]).permutation(len(ids))]
    return ids[rank::world_size][: len(ids) // world_size]


class NeighborSampler:
    def __init__(self, dataset: Dataset, fanouts, batch_size: int, seed: int = 0, shuffle: bool = True,
                 rank: int = 0, world_size: int = 1, split: str = "train", *, seed_ids=None):
        fanouts = [int(f) for f in fanouts]
        if not fanouts or any(f == 0 or f < -1 for f in fanouts):
            raise InputError(f"fanouts must be a non-empty list of positive ints or -1, found {fanouts}")
        if batch_size < 1:
            raise InputError(f"batch_size must be >= 1, found {batch_size}")
        if world_size < 1 or not 0 <= rank < world_size:
            raise InputError(f"rank must lie in [0, world_size), found rank={rank} world_size={world_size}")
        self.dataset, self.fanouts, self.batch_size = dataset, fanouts, int(batch_size)
        self.seed, self.shuffle, self.rank, self.world_size, self.split = seed, shuffle, rank, world_size, split

        layout = dataset.features()
        self.ntypes = list(layout.type_offsets)           # feature-file order
        self.type_offsets = {t: int(o) for t, o in layout.type_offsets.items()}
        self.label_type = dataset.label_type
        for t in dataset.node_types:
            if t not in self.type_offsets:
                raise DataError(dataset.path("metadata.json"),
                                f"node type {t!r} has no rows in features.type_offsets "
                                "(every node type needs features)")
        self.num_nodes = {t: dataset.num_nodes(t) for t in self.ntypes}
        self.etypes = []            # (name, src_type, dst_type, indptr, indices)
        for name in dataset.edge_types:
            s, _, d = dataset.edge_type_triple(name)
            indptr, indices = dataset.csc(name)
            if len(indptr) != self.num_nodes[d] + 1:
                raise DataError(dataset.path(f"topology/{name}/csc_indptr.npy"), "length",
                                expected=self.num_nodes[d] + 1, found=len(indptr))
            self.etypes.append((name, s, d, np.ascontiguousarray(indptr, dtype=np.int64),
                                np.ascontiguousarray(indices, dtype=np.int64)))
        self.triples = {name: dataset.edge_type_triple(name) for name in dataset.edge_types}

        ids = np.asarray(dataset.split(split) if seed_ids is None else seed_ids, dtype=np.int64)
        if ids.size and (ids.min() < 0 or ids.max() >= self.num_nodes[self.label_type]):
            raise DataError(dataset.path(f"splits/{split}.npy"), "seed ids out of range",
                            expected=f"[0, {self.num_nodes[self.label_type]})", found=(ids.min(), ids.max()))
        self.seed_ids = ids
        self.labels_all = np.asarray(dataset.labels())
        self.per_rank = len(ids) // world_size
        if self.per_rank == 0:
            raise InputError(f"split {split!r} has {len(ids)} seeds, fewer than world_size={world_size}")

    def __len__(self) -> int:
        """Batches per epoch (equal on every rank)."""
        return -(-self.per_rank // self.batch_size)

    @property
    def num_layers(self) -> int:
        return len(self.fanouts)

    def epoch_seeds(self, epoch: int) -> np.ndarray:
        """This rank's seeds for `epoch`, in batch order."""
        return deal_seeds(self.seed_ids, epoch, seed=self.seed, shuffle=self.shuffle, rank=self.rank,
                          world_size=self.world_size)

    def epoch(self, epoch: int) -> Iterator[MiniBatch]:
        seeds = self.epoch_seeds(epoch)
        marks = {t: np.full(n, -1, dtype=np.int64) for t, n in self.num_nodes.items()}
        for step in range(len(self)):
            chunk = seeds[step * self.batch_size:(step + 1) * self.batch_size]
            yield self.sample(chunk, key_parts=(self.seed, epoch, self.rank, step), epoch=epoch, step=step,
                              marks=marks)

    def sample(self, seeds: np.ndarray, key_parts=(0,), epoch: int = 0, step: int = 0, marks=None) -> MiniBatch:
        """Sample the blocks of one batch of seeds (label-type ids)."""
        seeds = np.ascontiguousarray(seeds, dtype=np.int64)
        if marks is None:
            marks = {t: np.full(n, -1, dtype=np.int64) for t, n in self.num_nodes.items()}
        frontier = {t: np.zeros(0, np.int64) for t in self.ntypes}
        frontier[self.label_type] = seeds
        blocks: list[Block] = []
        for layer in reversed(range(self.num_layers)):
            fanout = self.fanouts[layer]
            per_type_src: dict[str, list] = {t: [] for t in self.ntypes}
            sampled = {}
            for k, (name, s, d, indptr, indices) in enumerate(self.etypes):
                if frontier[d].size == 0:
                    continue
                key = batch_key(*key_parts, layer, k)
                src, dst = sample_layer(indptr, indices, frontier[d], fanout, key)
                sampled[name] = (src, dst)
                per_type_src[s].append(src)
            new_frontier, edges = {}, {}
            for t in self.ntypes:
                cands = per_type_src[t]
                allsrc = np.concatenate(cands) if cands else np.zeros(0, np.int64)
                nodes, local = relabel(frontier[t], allsrc, marks[t])
                new_frontier[t] = nodes
                o = 0
                for name, s, d, _, _ in self.etypes:
                    if s == t and name in sampled:
                        n = sampled[name][0].shape[0]
                        edges[name] = (local[o:o + n], sampled[name][1])
                        o += n
            block = Block(list(self.ntypes), {t: int(new_frontier[t].shape[0]) for t in self.ntypes},
                          {t: int(frontier[t].shape[0]) for t in self.ntypes},
                          {name: (torch.from_numpy(edges[name][0]), torch.from_numpy(edges[name][1]))
                           for name, *_ in self.etypes if name in edges},
                          {name: self.triples[name] for name, *_ in self.etypes if name in edges})
            blocks.insert(0, block)
            frontier = new_frontier
        input_nodes = np.concatenate([frontier[t] + self.type_offsets[t] for t in self.ntypes])
        return MiniBatch(input_nodes=input_nodes, seeds=seeds, blocks=blocks,
                         labels=np.asarray(self.labels_all[seeds], dtype=np.int64), epoch=epoch, step=step)
