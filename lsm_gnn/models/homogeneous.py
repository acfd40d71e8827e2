"""GraphSAGE, GCN and GAT for homogeneous graphs: a stack of convolutions over the blocks.

`model(blocks, x)` takes the sampled blocks (input side first) and the input features (rows in
block[0] source order) and returns logits for the last block's destination nodes (the seeds).
Between layers: ReLU (ELU for GAT, as in DGL's examples) and dropout.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from lsm_gnn.models.blocks import Block
from lsm_gnn.models.convs import GATConv, GCNConv, SAGEConv


class _Stack(nn.Module):
    activation = staticmethod(F.relu)

    def __init__(self, dropout: float):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.layers = nn.ModuleList()

    def _conv(self, i: int, block: Block, h: torch.Tensor) -> torch.Tensor:
        return self.layers[i](block.csr(next(iter(block.edges))), block.src, h, h[: block.num_dst])

    def forward(self, blocks: list[Block], x: torch.Tensor) -> torch.Tensor:
        if len(blocks) != len(self.layers):
            raise ValueError(f"model has {len(self.layers)} layers, got {len(blocks)} blocks")
        h = x
        for i, block in enumerate(blocks):
            h = self._conv(i, block, h)
            if i < len(self.layers) - 1:
                h = self.dropout(self.activation(h))
        return h


class SAGE(_Stack):
    def __init__(self, in_dim, hidden, num_classes, num_layers, dropout=0.0, **_):
        super().__init__(dropout)
        dims = [in_dim] + [hidden] * (num_layers - 1) + [num_classes]
        self.layers.extend(SAGEConv(a, b) for a, b in zip(dims[:-1], dims[1:]))


class GCN(_Stack):
    def __init__(self, in_dim, hidden, num_classes, num_layers, dropout=0.0, **_):
        super().__init__(dropout)
        dims = [in_dim] + [hidden] * (num_layers - 1) + [num_classes]
        self.layers.extend(GCNConv(a, b) for a, b in zip(dims[:-1], dims[1:]))


class GAT(_Stack):
    """Hidden layers concatenate `heads` heads of hidden // heads; the last averages its heads."""

    activation = staticmethod(F.elu)

    def __init__(self, in_dim, hidden, num_classes, num_layers, dropout=0.0, heads=4, **_):
        super().__init__(dropout)
        per_head = max(1, hidden // heads)
        d = in_dim
        for i in range(num_layers):
            last = i == num_layers - 1
            self.layers.append(GATConv(d, num_classes if last else per_head, heads))
            d = per_head * heads

    def _conv(self, i, block, h):
        out = super()._conv(i, block, h)
        return out.mean(1) if i == len(self.layers) - 1 else out.flatten(1)
