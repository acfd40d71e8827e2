"""Message-passing primitives on index tensors, the same on CPU and CUDA.

Aggregations are sparse (CSR) x dense products: they never materialise one row per edge, which
matters for the first layer, where a batch can have 150k edges of 1024-dim features.
"""

from __future__ import annotations

import warnings

import torch
import torch.nn.functional as F



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
