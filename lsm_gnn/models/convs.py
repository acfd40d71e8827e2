"""Graph convolutions on one relation of a block: `conv(crow, col, h_src, h_dst) -> (num_dst, out)`.

`crow` is the row pointer over destination nodes, `col` the source index of each in-edge (edges
sorted by destination), `h_dst` the destination nodes' own representations. Each layer computes
exactly what its DGL namesake computes on a block (tests compare them with copied weights):

- `SAGEConv` = dgl SAGEConv(aggregator_type="mean"): W_self h_v + W_neigh mean(h_u) + b. The mean
  is taken before the projection, which is cheaper whenever a layer has fewer destination than
  source nodes (always, in sampled blocks).
- `GCNConv` = dgl GraphConv(norm="both"): sum of h_u / sqrt(outdeg(u) indeg(v)), then W, + b.
- `GATConv` = dgl GATConv (negative slope 0.2, no residual): per-head attention over in-edges.
- `MeanConv`: W_r mean(h_u), the relation term of RGCN (no self term, no bias).

The message-passing primitives below them are the same on CPU and CUDA. Aggregations are sparse
(CSR) x dense products: they never materialise one row per edge, which matters for the first layer,
where a batch can have 150k edges of 1024-dim features.
"""

from __future__ import annotations

import warnings

import torch
import torch.nn.functional as F
from torch import nn


def _csr(crow: torch.Tensor, col: torch.Tensor, values: torch.Tensor, num_dst: int, num_src: int):
    with warnings.catch_warnings():  # "sparse CSR support is in beta" (once per process)
        warnings.simplefilter("ignore", UserWarning)
        return torch.sparse_csr_tensor(crow, col, values, size=(num_dst, num_src), check_invariants=False)


def in_degrees(crow: torch.Tensor) -> torch.Tensor:
    return crow[1:] - crow[:-1]


def weighted_sum(crow, col, weights, h_src: torch.Tensor) -> torch.Tensor:
    """out[v] = sum over in-edges e=(u, v) of weights[e] * h_src[u]  (edges sorted by dst)."""
    num_dst = crow.numel() - 1
    if col.numel() == 0:
        return h_src.new_zeros((num_dst,) + tuple(h_src.shape[1:]))
    shape = h_src.shape
    flat = h_src.reshape(shape[0], -1)
    out = _csr(crow, col, weights.to(flat.dtype), num_dst, shape[0]) @ flat
    return out.reshape((num_dst,) + tuple(shape[1:]))


def mean_aggregate(crow, col, h_src: torch.Tensor) -> torch.Tensor:
    """Mean of in-neighbour rows; 0 for a node without in-edges."""
    deg = in_degrees(crow)
    w = (1.0 / deg.clamp(min=1).to(h_src.dtype)).repeat_interleave(deg)
    return weighted_sum(crow, col, w, h_src)


def gcn_aggregate(crow, col, h_src: torch.Tensor, num_src: int) -> torch.Tensor:
    """Symmetric normalisation: sum of h_u / sqrt(outdeg(u) indeg(v)) (DGL GraphConv norm='both')."""
    deg_in = in_degrees(crow)
    deg_out = torch.bincount(col, minlength=num_src)
    dst = torch.repeat_interleave(torch.arange(deg_in.numel(), device=col.device), deg_in)
    w = (deg_out[col].clamp(min=1).to(h_src.dtype) * deg_in[dst].clamp(min=1).to(h_src.dtype)).rsqrt()
    return weighted_sum(crow, col, w, h_src)


def edge_softmax(crow, scores: torch.Tensor) -> torch.Tensor:
    """Softmax of per-edge scores (E, H) over the in-edges of each destination node."""
    deg = in_degrees(crow)
    num_dst = deg.numel()
    dst = torch.repeat_interleave(torch.arange(num_dst, device=scores.device), deg)
    idx = dst.unsqueeze(1).expand_as(scores)
    mx = scores.new_full((num_dst, scores.shape[1]), float("-inf"))
    mx = mx.scatter_reduce(0, idx, scores, reduce="amax", include_self=True)
    ex = torch.exp(scores - mx[dst].detach())
    den = scores.new_zeros((num_dst, scores.shape[1])).index_add_(0, dst, ex)
    return ex / den[dst]


def dst_index(crow: torch.Tensor) -> torch.Tensor:
    deg = in_degrees(crow)
    return torch.repeat_interleave(torch.arange(deg.numel(), device=crow.device), deg)


def leaky_relu(x: torch.Tensor, slope: float = 0.2) -> torch.Tensor:
    return F.leaky_relu(x, slope)


class SAGEConv(nn.Module):
    def __init__(self, in_dim: int, out_dim: int):
        super().__init__()
        self.fc_self = nn.Linear(in_dim, out_dim, bias=False)
        self.fc_neigh = nn.Linear(in_dim, out_dim, bias=False)
        self.bias = nn.Parameter(torch.zeros(out_dim))
        gain = nn.init.calculate_gain("relu")
        nn.init.xavier_uniform_(self.fc_self.weight, gain=gain)
        nn.init.xavier_uniform_(self.fc_neigh.weight, gain=gain)

    def forward(self, crow, col, h_src, h_dst):
        return self.fc_self(h_dst) + self.fc_neigh(mean_aggregate(crow, col, h_src)) + self.bias


class MeanConv(nn.Module):
    def __init__(self, in_dim: int, out_dim: int):
        super().__init__()
        self.fc = nn.Linear(in_dim, out_dim, bias=False)
        nn.init.xavier_uniform_(self.fc.weight, gain=nn.init.calculate_gain("relu"))

    def forward(self, crow, col, h_src, h_dst):
        return self.fc(mean_aggregate(crow, col, h_src))


class GCNConv(nn.Module):
    def __init__(self, in_dim: int, out_dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(in_dim, out_dim))
        self.bias = nn.Parameter(torch.zeros(out_dim))
        nn.init.xavier_uniform_(self.weight)

    def forward(self, crow, col, h_src, h_dst):
        return gcn_aggregate(crow, col, h_src, h_src.shape[0]) @ self.weight + self.bias


class GATConv(nn.Module):
    """Multi-head attention; returns (num_dst, heads, out_dim)."""

    def __init__(self, in_dim: int, out_dim: int, heads: int, negative_slope: float = 0.2):
        super().__init__()
        self.heads, self.out_dim, self.slope = heads, out_dim, negative_slope
        self.fc = nn.Linear(in_dim, heads * out_dim, bias=False)
        self.attn_l = nn.Parameter(torch.empty(1, heads, out_dim))
        self.attn_r = nn.Parameter(torch.empty(1, heads, out_dim))
        self.bias = nn.Parameter(torch.zeros(heads * out_dim))
        gain = nn.init.calculate_gain("relu")
        nn.init.xavier_normal_(self.fc.weight, gain=gain)
        nn.init.xavier_normal_(self.attn_l, gain=gain)
        nn.init.xavier_normal_(self.attn_r, gain=gain)

    def forward(self, crow, col, h_src, h_dst):
        H, Fo = self.heads, self.out_dim
        feat_src = self.fc(h_src).view(-1, H, Fo)
        feat_dst = self.fc(h_dst).view(-1, H, Fo)
        el = (feat_src * self.attn_l).sum(-1)
        er = (feat_dst * self.attn_r).sum(-1)
        dst = dst_index(crow)
        a = edge_softmax(crow, leaky_relu(el[col] + er[dst], self.slope))
        # gather + scatter (not a sparse product): the gradient must reach the attention weights,
        # and torch's sparse-value gradient breaks on duplicate (multi-)edges
        out = feat_src.new_zeros((feat_dst.shape[0], H, Fo)).index_add_(0, dst, feat_src[col] * a.unsqueeze(-1))
        return out + self.bias.view(1, H, Fo)
