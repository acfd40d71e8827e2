"""Models on the index-based blocks compute what DGL's layers compute, and train."""

from __future__ import annotations

import numpy as np
import pytest
import torch

dgl = pytest.importorskip("dgl")  # optional (the GPU machine has none): the module skips without it
dglnn = pytest.importorskip("dgl.nn")

from lsm_gnn.config import ModelConfig  # noqa: E402
from lsm_gnn.models import build_model  # noqa: E402
from lsm_gnn.models.blocks import Block  # noqa: E402
from lsm_gnn.models.convs import GATConv, GCNConv, SAGEConv  # noqa: E402
from lsm_gnn.utils.errors import ConfigError  # noqa: E402
from test_sampling import hetero_dataset  # noqa: E402, F401  (fixture)


def _random_block(seed=0, num_src=60, num_dst=20, num_edges=200):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(0, num_src, (num_edges,), generator=g)
    dst = torch.randint(0, num_dst, (num_edges,), generator=g)
    order = torch.argsort(dst, stable=True)
    src, dst = src[order], dst[order]
    ours = Block.homogeneous(num_src, num_dst, src, dst)
    theirs = dgl.create_block((src, dst), num_src_nodes=num_src, num_dst_nodes=num_dst)
    return ours, theirs


def _run(conv, block, h):
    return conv(block.csr(next(iter(block.edges))), block.src, h, h[: block.num_dst])


def test_sage_matches_dgl():
    ours, theirs = _random_block()
    h = torch.randn(ours.num_src, 16, generator=torch.Generator().manual_seed(1))
    conv = SAGEConv(16, 8)
    ref = dglnn.SAGEConv(16, 8, "mean")
    with torch.no_grad():
        ref.fc_self.weight.copy_(conv.fc_self.weight)
        ref.fc_neigh.weight.copy_(conv.fc_neigh.weight)
        conv.bias.copy_(torch.randn(8))
        ref.fc_self.bias.copy_(conv.bias)      # dgl 1.1 keeps the bias in fc_self
    torch.testing.assert_close(_run(conv, ours, h), ref(theirs, (h, h[: ours.num_dst])), rtol=1e-5, atol=1e-5)


def test_gcn_matches_dgl():
    ours, theirs = _random_block(2)
    h = torch.randn(ours.num_src, 16, generator=torch.Generator().manual_seed(3))
    conv = GCNConv(16, 8)
    ref = dglnn.GraphConv(16, 8, norm="both", allow_zero_in_degree=True)
    with torch.no_grad():
        ref.weight.copy_(conv.weight)
        conv.bias.copy_(torch.randn(8))
        ref.bias.copy_(conv.bias)
    torch.testing.assert_close(_run(conv, ours, h), ref(theirs, (h, h[: ours.num_dst])), rtol=1e-5, atol=1e-5)


def test_gat_matches_dgl():
    ours, theirs = _random_block(4)
    h = torch.randn(ours.num_src, 16, generator=torch.Generator().manual_seed(5))
    conv = GATConv(16, 6, heads=3)
    ref = dglnn.GATConv(16, 6, 3, allow_zero_in_degree=True)
    with torch.no_grad():
        ref.fc.weight.copy_(conv.fc.weight)
        ref.attn_l.copy_(conv.attn_l)
        ref.attn_r.copy_(conv.attn_r)
        conv.bias.copy_(torch.randn(18))
        ref.bias.copy_(conv.bias)
    torch.testing.assert_close(_run(conv, ours, h), ref(theirs, (h, h[: ours.num_dst])), rtol=1e-5, atol=1e-5)


def test_gat_gradients_flow_to_attention():
    ours, _ = _random_block(6)
    conv = GATConv(8, 4, heads=2)
    h = torch.randn(ours.num_src, 8)
    _run(conv, ours, h).sum().backward()
    assert conv.attn_l.grad is not None and conv.attn_l.grad.abs().sum() > 0


def test_node_without_in_edges_gets_self_term_only():
    block = Block.homogeneous(3, 2, [1], [0])        # dst 1 has no in-edges
    conv = SAGEConv(4, 2)
    h = torch.randn(3, 4)
    out = _run(conv, block, h)
    torch.testing.assert_close(out[1], conv.fc_self(h[1]) + conv.bias)


def test_from_dgl_roundtrip():
    ours, theirs = _random_block(8)
    back = Block.from_dgl(theirs)
    assert back.num_src == ours.num_src and back.num_dst == ours.num_dst
    assert torch.equal(back.src, ours.src) and torch.equal(back.dst, ours.dst)


@pytest.mark.parametrize("name", ["sage", "gcn", "gat"])
def test_homogeneous_models_fit_a_batch(random_dataset, name):
    from lsm_gnn.sampling import NeighborSampler

    torch.manual_seed(0)
    ds = random_dataset(num_nodes=600, dim=16, num_classes=4)
    sampler = NeighborSampler(ds, [5, 5], 64, seed=0)
    batch = next(sampler.epoch(0))
    model = build_model(ModelConfig(name=name, hidden=32, heads=4, dropout=0.0), ds, 2)
    x = torch.from_numpy(np.asarray(ds.feature_array())[batch.input_nodes])
    y = torch.from_numpy(batch.labels)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    losses = []
    for _ in range(30):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(batch.blocks, x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert model(batch.blocks, x).shape == (len(batch.seeds), 4)
    assert losses[-1] < 0.5 * losses[0]


def test_homogeneous_model_on_hetero_dataset_is_rejected(hetero_dataset):
    with pytest.raises(ConfigError, match="model.name"):
        build_model(ModelConfig(name="sage"), hetero_dataset, 2)


@pytest.mark.parametrize("name", ["rgcn", "rsage", "rgat"])
def test_hetero_models_fit_a_batch(hetero_dataset, name):
    from lsm_gnn.sampling import NeighborSampler

    torch.manual_seed(0)
    ds = hetero_dataset
    sampler = NeighborSampler(ds, [4, 4], 32, seed=0)
    batch = next(sampler.epoch(0))
    model = build_model(ModelConfig(name=name, hidden=16, heads=2, dropout=0.0), ds, 2)
    x = torch.from_numpy(np.asarray(ds.feature_array())[batch.input_nodes])
    y = torch.from_numpy(batch.labels)
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    first = None
    for _ in range(30):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(batch.blocks, x), y)
        loss.backward()
        opt.step()
        first = first if first is not None else loss.item()
    assert loss.item() < 0.5 * first
