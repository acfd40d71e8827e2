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
"""

from __future__ import annotations

import torch
from torch import nn

from lsm_gnn.models import ops


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
        return self.fc_self(h_dst) + self.fc_neigh(ops.mean_aggregate(crow, col, h_src)) + self.bias


class MeanConv(nn.Module):
    def __init__(self, in_dim: int, out_dim: int):
        super().__init__()
        self.fc = nn.Linear(in_dim, out_dim, bias=False)
        nn.init.xavier_uniform_(self.fc.weight, gain=nn.init.calculate_gain("relu"))

    def forward(self, crow, col, h_src, h_dst):
        return self.fc(ops.mean_aggregate(crow, col, h_src))


class GCNConv(nn.Module):
    def __init__(self, in_dim: int, out_dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(in_dim, out_dim))
        self.bias = nn.Parameter(torch.zeros(out_dim))
        nn.init.xavier_uniform_(self.weight)

    def forward(self, crow, col, h_src, h_dst):
        return ops.gcn_aggregate(crow, col, h_src, h_src.shape[0]) @ self.weight + self.bias


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
        dst = ops.dst_index(crow)
        a = ops.edge_softmax(crow, ops.leaky_relu(el[col] + er[dst], self.slope))
        # gather + scatter (not a sparse product): the gradient must reach the attention weights,
        # and torch's sparse-value gradient breaks on duplicate (multi-)edges
        out = feat_src.new_zeros((feat_dst.shape[0], H, Fo)).index_add_(0, dst, feat_src[col] * a.unsqueeze(-1))
        return out + self.bias.view(1, H, Fo)
