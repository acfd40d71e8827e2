"""A DGL data loader over an lsm-gnn feature source: GIDS's loop, with LSM-GNN's cache underneath.

    import dgl
    from lsm_gnn.sources.factory import make_feature_source
    from lsm_gnn.integrations.dgl import DGLDataLoader

    source = make_feature_source(cfg, dataset)              # the cache, shared cache, ideal, ...
    sampler = dgl.dataloading.NeighborSampler([10, 15])
    loader = DGLDataLoader(dataset, dataset.split("train"), sampler, source, cfg=cfg, batch_size=1024)
    for input_nodes, seeds, blocks, x in loader:            # x: the rows of input_nodes
        y = blocks[-1].dstdata["label"]
        loss = F.cross_entropy(model(blocks, x), y)         # a stock dgl.nn model
        ...

`graph` is a DGL graph whose node ids are the source's feature rows, or an lsm-gnn Dataset
(homogeneous; `graph_from_dataset` builds the DGL graph from its CSC, labels in ndata["label"]).
`sampler` is any DGL block sampler (`sample(g, seeds) -> (input_nodes, output_nodes, blocks)`),
or lsm-gnn's own `lsm_gnn.sampling.NeighborSampler`, whose blocks become DGL blocks
(`to_dgl_blocks`). Each yielded batch is lsm_gnn.train.loader's LoadedBatch: the 4-tuple, plus
`.labels` (the seeds' labels), `.times` and `.counts`.

The loader samples the lookahead window ahead and feeds it to the source (lsm_gnn.integrations.core).
Under torch.distributed every rank gets its shard of the seeds (the same dealing as `lsm-gnn train`);
with the shared cache each rank's source is `make_feature_source(cfg, dataset, rank, world)`.

Reproducible batches: lsm-gnn's sampler draws from keys (seed, epoch, rank, step), the same in any
thread, so the same script gives the same batches (and, with the same model seed, the same losses)
whichever source serves the rows. DGL 1.1's CPU samplers draw from per-thread generators that
`dgl.seed` does not reach in the loader's sampling thread (and with several OpenMP threads not
even in the main thread): their batches differ from run to run.
"""

from __future__ import annotations

import os

os.environ.setdefault("DGLBACKEND", "pytorch")

import dgl  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from lsm_gnn.integrations.core import SeedBatches, WindowedLoader, process_rank, require_homogeneous, seed_array, \
    setting  # noqa: E402
from lsm_gnn.sampling import MiniBatch, NeighborSampler  # noqa: E402
from lsm_gnn.utils.errors import InputError  # noqa: E402


def graph_from_dataset(dataset) -> dgl.DGLGraph:
    """The dataset's graph as a DGL graph (in-edges from its CSC), labels in ndata["label"]."""
    require_homogeneous(dataset)
    (etype,) = dataset.edge_types
    indptr, indices = dataset.csc(etype)
    g = dgl.graph(("csc", (torch.from_numpy(np.array(indptr, dtype=np.int64)),
                           torch.from_numpy(np.array(indices, dtype=np.int64)), torch.zeros(0, dtype=torch.int64))),
                  num_nodes=dataset.num_nodes())
    g.ndata["label"] = torch.from_numpy(np.array(dataset.labels(), dtype=np.int64))
    return g


def to_dgl_blocks(mb: MiniBatch, labels: torch.Tensor | None = None) -> list:
    """lsm-gnn's blocks of a homogeneous mini-batch as DGL blocks (input side first), with
    srcdata/dstdata[dgl.NID] (a block's nodes are a prefix of input_nodes) and the seeds'
    `labels` in the last block's dstdata["label"]."""
    nid = torch.from_numpy(mb.input_nodes)
    out = []
    for b in mb.blocks:
        blk = dgl.create_block((b.src, b.dst), num_src_nodes=b.num_src, num_dst_nodes=b.num_dst)
        blk.srcdata[dgl.NID], blk.dstdata[dgl.NID] = nid[:b.num_src], nid[:b.num_dst]
        out.append(blk)
    if labels is not None:
        out[-1].dstdata["label"] = labels
    return out


class DGLDataLoader(WindowedLoader):
    """Yields (input_nodes, seeds, blocks, features) with DGL blocks (see the module docstring).

    Settings left None come from `cfg` (batch_size, shuffle, seed, window, sample_ahead,
    overlap_fetch, device, warm-up and timed iterations), else from the config's defaults.
    `rank`/`world_size` default to torch.distributed's. `labels`: one per node (default:
    ndata["label"], else the dataset's); `max_iters`: stop each epoch after that many batches.
    """

    kind = "dgl"

    def __init__(self, graph, seeds, sampler, source, *, cfg=None, batch_size: int | None = None,
                 shuffle: bool | None = None, seed: int | None = None, drop_last: bool = False,
                 window: int | None = None, sample_ahead: int | None = None, overlap_fetch: bool | None = None,
                 device=None, max_iters: int | None = None, rank: int | None = None,
                 world_size: int | None = None, labels=None):
        dataset = None
        if isinstance(graph, dgl.DGLGraph):
            self.graph = graph
        elif hasattr(graph, "csc") and hasattr(graph, "features"):   # an lsm-gnn Dataset
            dataset, self.graph = graph, graph_from_dataset(graph)
        else:
            raise InputError(f"graph: expected a dgl.DGLGraph or an lsm-gnn Dataset, found {type(graph).__name__}")
        if not self.graph.is_homogeneous:
            raise InputError(f"graph: the DGL integration takes homogeneous graphs; this one has node types "
                             f"{self.graph.ntypes} and edge types {self.graph.canonical_etypes}")
        if seeds is None and dataset is not None:
            seeds = dataset.split("train")
        if seeds is None:
            raise InputError("seeds: give the training node ids (a DGL graph has no split of its own)")
        if labels is None:
            labels = self.graph.ndata.get("label")
        self.labels = None if labels is None else seed_array(labels, "labels")
        if sampler is None or not (isinstance(sampler, NeighborSampler) or hasattr(sampler, "sample")):
            raise InputError(f"sampler: expected a DGL block sampler (with sample(g, seeds)) or "
                             f"lsm_gnn.sampling.NeighborSampler, found {type(sampler).__name__}")
        self.sampler = sampler
        r, w = process_rank()
        self.rank = r if rank is None else int(rank)
        self.world_size = w if world_size is None else int(world_size)
        self.seed = int(setting(seed, cfg, "train", "seed"))
        batches = SeedBatches(seeds, int(setting(batch_size, cfg, "sampler", "batch_size")), self._sample,
                              seed=self.seed, shuffle=bool(setting(shuffle, cfg, "sampler", "shuffle")),
                              rank=self.rank, world_size=self.world_size, drop_last=drop_last)
        self._marks = None
        super().__init__(batches, source, cfg=cfg, window=window, dataset=dataset, sample_ahead=sample_ahead,
                         overlap_fetch=overlap_fetch, device=device, max_iters=max_iters)

    def _batch(self, item):
        """The batch with input_nodes and seeds as tensors, as DGL's loaders give them."""
        out = tuple.__new__(type(item), (torch.from_numpy(item[0]), torch.from_numpy(item[1]), item[2], item[3]))
        out.__dict__.update(item.__dict__)
        return out

    def _seed_labels(self, seeds: np.ndarray) -> np.ndarray:
        return self.labels[seeds] if self.labels is not None else np.zeros(0, np.int64)

    def _sample(self, seeds: np.ndarray, epoch: int, step: int) -> MiniBatch:
        if isinstance(self.sampler, NeighborSampler):
            if self._marks is None:
                self._marks = {t: np.full(n, -1, dtype=np.int64) for t, n in self.sampler.num_nodes.items()}
            mb = self.sampler.sample(seeds, key_parts=(self.seed, epoch, self.rank, step), epoch=epoch, step=step,
                                     marks=self._marks)
            mb.labels = self._seed_labels(seeds)
            mb.blocks = to_dgl_blocks(mb, torch.from_numpy(mb.labels) if self.labels is not None else None)
            return mb
        input_nodes, output_nodes, blocks = self.sampler.sample(self.graph, torch.from_numpy(seeds))
        if isinstance(input_nodes, dict):
            raise InputError("sampler: returned per-type input nodes; the DGL integration takes homogeneous graphs")
        return MiniBatch(input_nodes=input_nodes.to(torch.int64).numpy(),
                         seeds=output_nodes.to(torch.int64).numpy(), blocks=blocks,
                         labels=self._seed_labels(seeds), epoch=epoch, step=step)
