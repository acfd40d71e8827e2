"""PyG over lsm-gnn feature sources: the FeatureStore's contract, a stock torch_geometric GraphSAGE
trained through the cache on the file's rows with the in-memory run's losses, the sampler's hops."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

pytest.importorskip("torch_geometric")

from torch_geometric.nn import GraphSAGE  # noqa: E402
from torch_geometric.sampler import NodeSamplerInput  # noqa: E402

from lsm_gnn.config import load_config  # noqa: E402
from lsm_gnn.datasets.synthetic import generate  # noqa: E402
from lsm_gnn.sources.factory import make_feature_source  # noqa: E402
from lsm_gnn.integrations.pyg import LsmFeatureStore, LsmSampler, PyGLoader  # noqa: E402
from lsm_gnn.sampling import NeighborSampler  # noqa: E402
from lsm_gnn.train.loader import FeatureLoader  # noqa: E402
from lsm_gnn.utils.errors import InputError  # noqa: E402

ITERS = 20
FANOUTS = [4, 4]


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    return generate(tmp_path_factory.mktemp("pyg") / "ds", 3000, feature_dim=16, num_classes=5, progress=False)


def cfg_for(ds, cached: bool):
    base = {"dataset.path": str(ds.root), "sampler.batch_size": 64, "sampler.fanouts": FANOUTS, "train.threads": 1,
            "train.seed": 3}
    base.update({"storage.reader": "buffered", "cache.capacity_fraction": 0.1, "cache.window": 3} if cached
                else {"storage.reader": "memory", "cache.enabled": False})
    return load_config(None, base)


def train(loader, truth):
    torch.manual_seed(0)
    model = GraphSAGE(16, 16, num_layers=2, out_channels=5)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    losses, exact = [], True
    for batch in loader:
        exact &= np.array_equal(batch.x.numpy(), truth[batch.n_id.numpy()])
        out = model(batch.x, batch.edge_index)[:batch.batch_size]
        loss = F.cross_entropy(out, batch.y[:batch.batch_size])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, exact


def test_a_stock_pyg_graphsage_trains_through_the_cache_with_the_in_memory_runs_losses(ds):
    truth = ds.feature_array()
    runs = {}
    for cached in (True, False):
        cfg = cfg_for(ds, cached)
        store = LsmFeatureStore(make_feature_source(cfg, ds), ds)
        loader = PyGLoader(store, LsmSampler(ds, FANOUTS), cfg=cfg, max_iters=ITERS)
        try:
            runs[cached] = train(loader, truth) + (loader.stats(),)
        finally:
            loader.close()
    (cache_losses, cache_exact, stats), (mem_losses, mem_exact, _) = runs[True], runs[False]
    assert cache_exact and mem_exact and len(cache_losses) == ITERS
    assert cache_losses == mem_losses
    assert stats["rows"]["local_hits"] > 0 and stats["source"]["window"] == 3
    assert stats["pipeline"]["loader"] == "pyg"


def test_the_pyg_loader_fetches_the_batches_of_lsm_gnns_own_loader(ds):
    """The same seeds, keys and source: the cache sees the requests FeatureLoader sends it."""
    cfg = cfg_for(ds, True)
    with make_feature_source(cfg, ds) as src:
        own = FeatureLoader(NeighborSampler(ds, FANOUTS, 64, seed=3), src, window=3, max_iters=6)
        ours = [b.input_nodes.copy() for b in own.epoch(0)]
        own_rows = src.counters.as_dict()
    store = LsmFeatureStore(make_feature_source(cfg, ds), ds)
    loader = PyGLoader(store, LsmSampler(ds, FANOUTS), cfg=cfg, max_iters=6)
    theirs = [b.n_id.numpy().copy() for b in loader]
    assert all(np.array_equal(a, b) for a, b in zip(ours, theirs)) and len(theirs) == 6
    assert loader.stats()["rows"] == own_rows
    loader.close()


def test_the_sampler_gives_pyg_hops_each_nodes_in_edges_sampled_once(ds):
    smp = LsmSampler(ds, [3, 5])
    seeds = torch.from_numpy(np.array(ds.split("train"))[:32])
    out = smp.sample_from_nodes(NodeSamplerInput(input_id=None, node=seeds))
    assert torch.equal(out.node[:32], seeds)
    n0, n1, n2 = out.num_sampled_nodes
    e1, e2 = out.num_sampled_edges
    assert n0 == 32 and len(out.node) == n0 + n1 + n2 and len(out.row) == e1 + e2
    assert out.col[:e1].max() < n0 and out.row[:e1].max() < n0 + n1           # hop 1: into the seeds
    assert out.col[e1:].min() >= n0 and out.col[e1:].max() < n0 + n1          # hop 2: into hop 1's nodes
    assert torch.bincount(out.col[:e1], minlength=n0).max() <= 5
    # every edge is an edge of the graph (source -> destination in the CSC's in-edges)
    indptr, indices = (np.asarray(a) for a in ds.csc(ds.edge_types[0]))
    node = out.node.numpy()
    for u, v in zip(node[out.row.numpy()], node[out.col.numpy()]):
        assert u in indices[indptr[v]:indptr[v + 1]]


def test_the_feature_store_keeps_pygs_contract_and_refuses_writes_to_the_source(ds):
    cfg = cfg_for(ds, True)
    store = LsmFeatureStore(make_feature_source(cfg, ds), ds)
    truth = ds.feature_array()
    try:
        ids = torch.tensor([5, 0, 5, 2999])
        assert np.array_equal(store.get_tensor(None, "x", ids).numpy(), truth[ids.numpy()])
        assert np.array_equal(store[None, "x", 7:9].numpy(), truth[7:9])
        assert store.get_tensor_size(None, "x") == (3000, 16)
        assert {(a.group_name, a.attr_name) for a in store.get_all_tensor_attrs()} == {(None, "x"), (None, "y")}
        assert torch.equal(store.get_tensor(None, "y", ids), torch.as_tensor(np.asarray(ds.labels())[ids.numpy()]))
        with pytest.raises(InputError, match="'x' is read from the lsm-gnn feature source"):
            store.put_tensor(torch.zeros(3000, 16), None, "x", None)
        with pytest.raises(InputError, match="cannot be removed"):
            store.remove_tensor(None, "x", None)
        assert store.put_tensor(torch.ones(3000), None, "mask", None)
        assert store.get_tensor_size(None, "mask") == (3000,)
        assert store.remove_tensor(None, "mask", None) and store.get_tensor_size(None, "mask") is None
        with pytest.raises(InputError, match="whole tensors only"):
            store.put_tensor(torch.ones(2), None, "mask", torch.tensor([0, 1]))
    finally:
        store.close()
