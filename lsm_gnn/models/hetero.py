"""Relational models for heterogeneous graphs (IGBH-like): RGCN, RSAGE and RGAT.

One layer computes, for each destination node type t,
    h'_v = W_self[t] h_v + AGG over relations r ending in t of conv_r(h_src of r, h_v)
so every node type that has destination nodes gets an output even without in-relations.
- RGCN: conv_r = W_r mean(h_u) (RelGraphConv with self-loop, no basis decomposition), AGG = sum.
- RSAGE: conv_r = SAGE (mean) per relation, AGG = mean over relations.
- RGAT: conv_r = GAT per relation (heads concatenated in hidden layers, averaged in the last),
  AGG = sum.
Input features arrive flat in block[0] type order; logits are for the label type's seeds.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from lsm_gnn.models.blocks import Block
from lsm_gnn.models.convs import GATConv, MeanConv, SAGEConv


def _key(name: str) -> str:
    return name.replace(".", "_")


class HeteroLayer(nn.Module):
    def __init__(self, ntypes, etypes, make_conv, in_dim, out_dim, aggregate="sum", heads_out=None):
        super().__init__()
        self.aggregate, self.heads_out, self.out_dim = aggregate, heads_out, out_dim
        self.self_fc = nn.ModuleDict({_key(t): nn.Linear(in_dim, out_dim) for t in ntypes})
        self.convs = nn.ModuleDict({_key(e): make_conv(in_dim) for e in etypes})

    def forward(self, block: Block, h: dict) -> dict:
        out = {}
        for t in block.ntypes:
            nd = block.dst_counts[t]
            if nd == 0:
                continue
            terms = []
            for etype in block.edges:
                s, _, d = block.triple(etype)
                if d != t:
                    continue
                r = self.convs[_key(etype)](block.csr(etype), block.edges[etype][0], h[s], h[t][:nd])
                if self.heads_out == "flatten":
                    r = r.flatten(1)
                elif self.heads_out == "mean":
                    r = r.mean(1)
                terms.append(r)
            y = self.self_fc[_key(t)](h[t][:nd])
            if terms:
                agg = torch.stack(terms).sum(0) if self.aggregate == "sum" else torch.stack(terms).mean(0)
                y = y + agg
            out[t] = y
        return out


class _RelModel(nn.Module):
    activation = staticmethod(F.relu)
    aggregate = "sum"

    def __init__(self, in_dim, hidden, num_classes, num_layers, dropout=0.0, *, ntypes, etypes,
                 label_type, heads=4, **_):
        super().__init__()
        self.label_type = label_type
        self.dropout = nn.Dropout(dropout)
        self.layers = nn.ModuleList()
        d = in_dim
        for i in range(num_layers):
            last = i == num_layers - 1
            out = num_classes if last else hidden
            self.layers.append(self._layer(ntypes, etypes, d, out, last, heads))
            d = self.layers[-1].out_dim

    def _layer(self, ntypes, etypes, d, out, last, heads):
        raise NotImplementedError

    def forward(self, blocks: list[Block], x: torch.Tensor) -> torch.Tensor:
        if len(blocks) != len(self.layers):
            raise ValueError(f"model has {len(self.layers)} layers, got {len(blocks)} blocks")
        h = blocks[0].split_by_type(x)
        for i, (layer, block) in enumerate(zip(self.layers, blocks)):
            h = layer(block, h)
            if i < len(self.layers) - 1:
                h = {t: self.dropout(self.activation(v)) for t, v in h.items()}
        return h[self.label_type]


class RGCN(_RelModel):
    def _layer(self, ntypes, etypes, d, out, last, heads):
        return HeteroLayer(ntypes, etypes, lambda i: MeanConv(i, out), d, out, "sum")


class RSAGE(_RelModel):
    def _layer(self, ntypes, etypes, d, out, last, heads):
        return HeteroLayer(ntypes, etypes, lambda i: SAGEConv(i, out), d, out, "mean")


class RGAT(_RelModel):
    activation = staticmethod(F.elu)

    def _layer(self, ntypes, etypes, d, out, last, heads):
        per_head = out if last else max(1, out // heads)
        width = out if last else per_head * heads
        return HeteroLayer(ntypes, etypes, lambda i: GATConv(i, per_head, heads), d, width, "sum",
                           heads_out="mean" if last else "flatten")
