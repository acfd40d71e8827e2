"""PyG over an lsm-gnn feature source: a FeatureStore, a sampler behind PyG's interface, a loader.

    from lsm_gnn.sources.factory import make_feature_source
    from lsm_gnn.integrations.pyg import LsmFeatureStore, LsmSampler, PyGLoader
    from torch_geometric.nn import GraphSAGE

    store = LsmFeatureStore(make_feature_source(cfg, dataset), dataset)   # x: the source; y: labels
    loader = PyGLoader(store, LsmSampler(dataset, [10, 15]), cfg=cfg, batch_size=1024)
    for batch in loader:                                    # torch_geometric.data.Data
        out = model(batch.x, batch.edge_index)[:batch.batch_size]
        loss = F.cross_entropy(out, batch.y[:batch.batch_size])

`LsmFeatureStore` is a torch_geometric.data.FeatureStore: the attribute `x` (group None) is read
through the feature source (`get_tensor(None, "x", index=ids)` -> the rows of ids) and cannot be
written; other attributes (the dataset's labels as `y`, whatever a user puts) are whole tensors
held in memory. `advance(window)` hands the source the next batches' ids. Any PyG code that reads
a FeatureStore reads it (e.g. torch_geometric.loader.NodeLoader with `data=(store, graph_store)`),
but only a loader that calls `advance` gives the cache its lookahead: `PyGLoader` does.

`LsmSampler` is a torch_geometric.sampler.BaseSampler over lsm-gnn's own numba sampler (PyPI has
no pyg-lib or torch-sparse for torch 2.13 on the CPU, which PyG's NeighborSampler needs). Its
output is PyG's: `node` = the batch's nodes, seeds first, then each hop's new nodes; every node's
in-edges are sampled once, at the hop that reached it (the edges lsm-gnn's blocks sample again
for nodes of earlier hops are left out), so `num_sampled_nodes`/`num_sampled_edges` per hop hold
as in PyG's NeighborLoader. `PyGLoader` takes it or any BaseSampler with `sample_from_nodes`.

`PyGLoader` (lsm_gnn.integrations.core) deals the seeds to the ranks, samples the lookahead window
ahead, feeds it to the store, and yields `Data(x, edge_index, y, n_id, batch_size, input_id,
num_sampled_nodes, num_sampled_edges)`, as NeighborLoader does. With lsm-gnn's sampler the batches
are those of `lsm-gnn train` (keys seed, epoch, rank, step), the same in every run.
"""

from __future__ import annotations

import numpy as np
import torch
from torch_geometric.data import Data, FeatureStore, TensorAttr
from torch_geometric.sampler import BaseSampler, NodeSamplerInput, SamplerOutput

from lsm_gnn.contract import FeatureSource, as_source
from lsm_gnn.integrations.core import SeedBatches, WindowedLoader, process_rank, require_homogeneous, setting
from lsm_gnn.sampling import MiniBatch, NeighborSampler
from lsm_gnn.utils.errors import InputError


def _as_tensor(rows) -> torch.Tensor:
    if isinstance(rows, torch.Tensor):
        return rows
    rows = np.asarray(rows)
    return torch.from_numpy(rows if rows.flags.writeable else rows.copy())


class LsmFeatureStore(FeatureStore):
    """A torch_geometric FeatureStore whose `x` rows come from an lsm-gnn feature source."""

    def __init__(self, source, dataset, *, attr_name: str = "x", labels: bool = True):
        super().__init__()
        require_homogeneous(dataset)
        lay = dataset.features()
        self.__dict__.update(source=as_source(source), dataset=dataset, num_rows=lay.num_rows, dim=lay.dim,
                             source_key=(None, attr_name), _memory={})
        if labels:
            self._memory[(None, "y")] = torch.from_numpy(np.array(dataset.labels(), dtype=np.int64))

    def advance(self, window) -> None:
        """The ids of the next mini-batches (FeatureSource.advance)."""
        self.source.advance(window)

    def _ids(self, index) -> np.ndarray:
        if index is None:
            return np.arange(self.num_rows, dtype=np.int64)
        if isinstance(index, slice):
            return np.arange(*index.indices(self.num_rows), dtype=np.int64)
        if isinstance(index, torch.Tensor):
            index = index.detach().cpu().numpy()
        return np.atleast_1d(np.asarray(index))

    def _put_tensor(self, tensor, attr: TensorAttr) -> bool:
        key = (attr.group_name, attr.attr_name)
        if key == self.source_key:
            raise InputError(f"LsmFeatureStore: {attr.attr_name!r} is read from the lsm-gnn feature source "
                             f"({self.source.source_name}) and cannot be written")
        if not (attr.index is None or attr.index == slice(None)):
            raise InputError(f"LsmFeatureStore: put whole tensors only (index None), found index {attr.index!r} "
                             f"for {attr.attr_name!r}")
        self._memory[key] = _as_tensor(tensor)
        return True

    def _get_tensor(self, attr: TensorAttr):
        key = (attr.group_name, attr.attr_name)
        if key == self.source_key:
            return _as_tensor(self.source.fetch(self._ids(attr.index)))
        if key not in self._memory:
            raise KeyError(f"LsmFeatureStore has no tensor {key}; it holds {sorted(map(str, self._keys()))}")
        t = self._memory[key]
        return t if attr.index is None else t[attr.index]

    def _remove_tensor(self, attr: TensorAttr) -> bool:
        key = (attr.group_name, attr.attr_name)
        if key == self.source_key:
            raise InputError(f"LsmFeatureStore: {attr.attr_name!r} is the feature source's and cannot be removed")
        return self._memory.pop(key, None) is not None

    def _get_tensor_size(self, attr: TensorAttr):
        key = (attr.group_name, attr.attr_name)
        if key == self.source_key:
            return (self.num_rows, self.dim)
        t = self._memory.get(key)
        return None if t is None else tuple(t.shape)

    def _keys(self) -> list:
        return [self.source_key, *self._memory]

    def get_all_tensor_attrs(self) -> list:
        return [TensorAttr(group, name) for group, name in self._keys()]

    def close(self) -> None:
        self.source.close()

    def __repr__(self) -> str:
        return f"LsmFeatureStore(source={self.source.source_name}, rows={self.num_rows}, dim={self.dim})"


class _StoreSource(FeatureSource):
    """The FeatureSource contract over an LsmFeatureStore: rows read through PyG's get_tensor,
    the window through the store's advance, the figures those of the store's source."""

    def __init__(self, store: LsmFeatureStore):
        self.store, src = store, store.source
        self.counters, self.device, self.fetch_stage, self.heartbeat = src.counters, src.device, \
            src.fetch_stage, src.heartbeat
        self.group, self.attr = store.source_key

    def check_ids(self, ids, what: str = "ids"):
        return ids  # the store's source checks them

    def _advance(self, window) -> None:
        self.store.advance(window)

    def _fetch(self, ids):
        return self.store.get_tensor(self.group, self.attr, torch.from_numpy(np.asarray(ids)))

    @property
    def last_tiers(self):
        return self.store.source.last_tiers

    def stats(self):
        return self.store.source.stats()

    def stage_seconds(self):
        return self.store.source.stage_seconds()

    def io_counters(self):
        return self.store.source.io_counters()

    def memory(self):
        return self.store.source.memory()

    def storage_info(self):
        return self.store.source.storage_info()

    @property
    def source_name(self) -> str:
        return self.store.source.source_name

    def close(self) -> None:
        self.store.close()


class LsmSampler(BaseSampler):
    """lsm-gnn's neighbour sampler behind PyG's BaseSampler (see the module docstring).
    `sample_from_nodes` draws from keys (seed, call number); PyGLoader draws from (seed, epoch,
    rank, step), as `lsm-gnn train` does."""

    def __init__(self, dataset, fanouts, *, seed: int = 0):
        require_homogeneous(dataset)
        self.sampler = NeighborSampler(dataset, fanouts, 1, seed=seed, shuffle=False)
        self.seed, self._calls, self._marks = int(seed), 0, None

    def sample(self, seeds: np.ndarray, key_parts) -> MiniBatch:
        if self._marks is None:
            self._marks = {t: np.full(n, -1, dtype=np.int64) for t, n in self.sampler.num_nodes.items()}
        return self.sampler.sample(np.asarray(seeds, dtype=np.int64), key_parts=key_parts, marks=self._marks)

    def sample_from_nodes(self, inputs: NodeSamplerInput, **kwargs) -> SamplerOutput:
        self._calls += 1
        seeds = inputs.node.detach().cpu().numpy()
        return self.output(self.sample(seeds, (self.seed, self._calls)), inputs.input_id)

    def sample_from_edges(self, inputs, neg_sampling=None):
        raise InputError("LsmSampler samples from nodes only (node-level tasks); link prediction is not supported")

    @staticmethod
    def output(mb: MiniBatch, input_id=None) -> SamplerOutput:
        """A homogeneous mini-batch as PyG's SamplerOutput (hop by hop from the seeds)."""
        blocks, L = mb.blocks, len(mb.blocks)
        rows, cols, nodes, edges = [], [], [len(mb.seeds)], []
        for layer in reversed(range(L)):
            b = blocks[layer]
            src, dst = b.src, b.dst
            if layer + 1 < L:  # this hop samples the in-edges of the nodes the previous hop reached
                keep = dst >= blocks[layer + 1].num_dst
                src, dst = src[keep], dst[keep]
            rows.append(src)
            cols.append(dst)
            nodes.append(b.num_src - b.num_dst)
            edges.append(len(src))
        seeds = torch.from_numpy(mb.seeds)
        return SamplerOutput(node=torch.from_numpy(mb.input_nodes), row=torch.cat(rows), col=torch.cat(cols),
                             edge=None, batch=None, num_sampled_nodes=nodes, num_sampled_edges=edges,
                             metadata=(seeds if input_id is None else input_id, None))


class PyGLoader(WindowedLoader):
    """Yields torch_geometric.data.Data mini-batches whose x comes through `feature_store`.

    `sampler`: an LsmSampler or any BaseSampler with sample_from_nodes (homogeneous output).
    `input_nodes`: the seeds (default: the dataset's training split). Settings left None come
    from `cfg`, else from the config's defaults; `rank`/`world_size` from torch.distributed.
    """

    kind = "pyg"

    def __init__(self, feature_store: LsmFeatureStore, sampler, input_nodes=None, *, cfg=None,
                 batch_size: int | None = None, shuffle: bool | None = None, seed: int | None = None,
                 drop_last: bool = False, window: int | None = None, sample_ahead: int | None = None,
                 overlap_fetch: bool | None = None, device=None, max_iters: int | None = None,
                 rank: int | None = None, world_size: int | None = None):
        if not isinstance(feature_store, LsmFeatureStore):
            raise InputError(f"feature_store: expected an LsmFeatureStore, found {type(feature_store).__name__}")
        if not hasattr(sampler, "sample_from_nodes"):
            raise InputError(f"sampler: expected a torch_geometric BaseSampler (LsmSampler), found "
                             f"{type(sampler).__name__}")
        self.store, self.sampler = feature_store, sampler
        dataset = feature_store.dataset
        if input_nodes is None:
            input_nodes = dataset.split("train")
        r, w = process_rank()
        self.rank = r if rank is None else int(rank)
        self.world_size = w if world_size is None else int(world_size)
        self.seed = int(setting(seed, cfg, "train", "seed"))
        self._extra = [a for a in feature_store.get_all_tensor_attrs()
                       if (a.group_name, a.attr_name) != feature_store.source_key]
        batches = SeedBatches(input_nodes, int(setting(batch_size, cfg, "sampler", "batch_size")), self._sample,
                              seed=self.seed, shuffle=bool(setting(shuffle, cfg, "sampler", "shuffle")),
                              rank=self.rank, world_size=self.world_size, drop_last=drop_last)
        super().__init__(batches, _StoreSource(feature_store), cfg=cfg, window=window, dataset=dataset,
                         sample_ahead=sample_ahead, overlap_fetch=overlap_fetch, device=device, max_iters=max_iters)

    def _sample(self, seeds: np.ndarray, epoch: int, step: int) -> MiniBatch:
        if isinstance(self.sampler, LsmSampler):
            out = LsmSampler.output(self.sampler.sample(seeds, (self.seed, epoch, self.rank, step)))
        else:
            out = self.sampler.sample_from_nodes(NodeSamplerInput(input_id=None, node=torch.from_numpy(seeds)))
            if not isinstance(out, SamplerOutput):
                raise InputError(f"sampler: returned {type(out).__name__}; the PyG integration takes homogeneous "
                                 "graphs (SamplerOutput)")
        mb = MiniBatch(input_nodes=out.node.to(torch.int64).numpy(), seeds=seeds, blocks=[],
                       labels=np.zeros(0, np.int64), epoch=epoch, step=step)
        # the in-memory attributes (y, ...) gathered here, in the sampling thread
        attrs = [TensorAttr(a.group_name, a.attr_name, out.node) for a in self._extra]
        mb.sampled, mb.extra = out, dict(zip((a.attr_name for a in attrs), self.store.multi_get_tensor(attrs)))
        return mb

    def _batch(self, item) -> Data:
        mb = item.minibatch
        out = mb.sampled
        data = Data(x=item.features, edge_index=torch.stack([out.row, out.col], dim=0), **mb.extra)
        data.n_id, data.batch_size, data.input_id = out.node, len(mb.seeds), out.metadata[0]
        data.num_sampled_nodes, data.num_sampled_edges = out.num_sampled_nodes, out.num_sampled_edges
        if self.device.type != "cpu":
            data = data.to(self.device, non_blocking=True)
        return data
