"""Stand-ins for the simulator tests: an LRU decision replay with the signature of
`lsm_gnn.cache.replay.replay`, and a tiny seeded sampler with the `NeighborSampler` API."""

from __future__ import annotations

import math
from collections import OrderedDict
from types import SimpleNamespace

import numpy as np

from lsm_gnn.sim.simulate import set_geometry


def lru_replay(batches, cfg, num_rows, static_scores, *, budget, num_owners=1, owner=0, engine="cpu"):
    """Set-associative LRU over the budget's cache lines (no victim buffer), batch semantics:
    hits are the rows resident when the batch starts."""
    sets, ways = set_geometry(budget.cache_rows, cfg.ways)
    cache = [OrderedDict() for _ in range(sets)]
    out = SimpleNamespace(requests=0, distinct=0, hits=0, victim_hits=0, storage_rows=0, evictions=0, spills=0,
                          spill_dropped=0, prefetched=0)  # no victim buffer: nothing spilled or prefetched
    for batch in batches:
        batch = np.asarray(batch)
        assert np.all(batch % num_owners == owner), "replayed a row this owner does not own"
        out.requests += len(batch)
        distinct = list(dict.fromkeys(batch.tolist()))
        out.distinct += len(distinct)
        misses = []
        for v in distinct:
            s = cache[(v // num_owners) % sets]
            if v in s:
                out.hits += 1
                s.move_to_end(v)
            else:
                misses.append(v)
        for v in misses:
            out.storage_rows += 1
            if ways == 0:
                continue
            s = cache[(v // num_owners) % sets]
            if len(s) >= ways:
                s.popitem(last=False)
                out.evictions += 1
            s[v] = True
    return SimpleNamespace(totals=vars(out))


class StandInSampler:
    """Seeded one-hop sampler over the dataset's CSC graph, sharded over ranks with equal counts."""

    def __init__(self, dataset, fanouts, batch_size, seed=0, shuffle=True, rank=0, world_size=1, split="train"):
        self.indptr, self.indices = (np.asarray(a) for a in dataset.csc(dataset.edge_types[0]))
        seeds = np.asarray(dataset.split(split))
        per_rank = len(seeds) // world_size
        self.seeds = seeds[rank * per_rank:(rank + 1) * per_rank]
        self.fanout, self.batch_size, self.seed, self.rank, self.shuffle = fanouts[0], batch_size, seed, rank, shuffle

    def __len__(self):
        return math.ceil(len(self.seeds) / self.batch_size)

    def epoch(self, e):
        rng = np.random.default_rng((self.seed, e, self.rank))
        order = rng.permutation(self.seeds) if self.shuffle else self.seeds
        for i in range(0, len(order), self.batch_size):
            seeds = order[i:i + self.batch_size]
            nbrs = [self.indices[self.indptr[v]:self.indptr[v + 1]] for v in seeds]
            picked = [rng.choice(n, min(self.fanout, len(n)), replace=False) for n in nbrs if len(n)]
            ids = np.concatenate([seeds, *picked]).astype(np.int64)
            yield SimpleNamespace(input_nodes=ids, seeds=seeds)
