"""The index-based block: one message-passing layer of a sampled mini-batch, in plain tensors.

A `Block` is what DGL calls a message-flow graph, reduced to index tensors so the same model code
runs on CPU and CUDA without DGL (PyPI has no CUDA build of DGL). Conventions (as in DGL):

- Nodes are grouped by node type; `src_counts[t]` source and `dst_counts[t]` destination nodes.
- The destination nodes of type t are the first `dst_counts[t]` source nodes of type t, so a
  layer reads a destination node's own representation as `h_src[t][:dst_counts[t]]`.
- `edges[etype] = (src, dst)`: int64 local indices (src into the source nodes of the relation's
  source type, dst into the destination nodes of its destination type), **sorted by dst** (the
  sampler emits them that way; aggregation builds a CSR from it without sorting).
- `etype` is the dataset's edge-type name `src__rel__dst`.

Features of a hetero block arrive as one flat (sum of src_counts, dim) tensor in `ntypes` order;
`split_by_type` cuts it into per-type tensors.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class Block:
    ntypes: list[str]
    src_counts: dict[str, int]
    dst_counts: dict[str, int]
    edges: dict[str, tuple[torch.Tensor, torch.Tensor]]
    etype_triples: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    _csr: dict = field(default_factory=dict, repr=False, compare=False)

    # ---- constructors ----------------------------------------------------------------------
    @classmethod
    def homogeneous(cls, num_src: int, num_dst: int, src, dst, ntype: str = "_N",
                    etype: str = "_N___E___N") -> "Block":
        src = torch.as_tensor(src, dtype=torch.int64)
        dst = torch.as_tensor(dst, dtype=torch.int64)
        return cls([ntype], {ntype: int(num_src)}, {ntype: int(num_dst)}, {etype: (src, dst)},
                   {etype: (ntype, "_E", ntype)})

    @classmethod
    def from_dgl(cls, block) -> "Block":
        """Convert a DGL block (homogeneous or heterogeneous); edges are re-sorted by dst."""
        ntypes = list(block.srctypes)
        src_counts = {t: int(block.num_src_nodes(t)) for t in ntypes}
        dst_counts = {t: int(block.num_dst_nodes(t)) if t in block.dsttypes else 0 for t in ntypes}
        edges, triples = {}, {}
        for (s, r, d) in block.canonical_etypes:
            u, v = block.edges(etype=(s, r, d))
            order = torch.argsort(v, stable=True)
            name = f"{s}__{r}__{d}"
            edges[name] = (u[order].to(torch.int64), v[order].to(torch.int64))
            triples[name] = (s, r, d)
        return cls(ntypes, src_counts, dst_counts, edges, triples)

    # ---- homogeneous shortcuts -------------------------------------------------------------
    @property
    def is_homogeneous(self) -> bool:
        return len(self.ntypes) == 1 and len(self.edges) == 1

    def _only(self):
        if not self.is_homogeneous:
            raise ValueError("this block is heterogeneous; use per-type fields")
        return self.ntypes[0], next(iter(self.edges))

    @property
    def num_src(self) -> int:
        return self.src_counts[self._only()[0]]

    @property
    def num_dst(self) -> int:
        return self.dst_counts[self._only()[0]]

    @property
    def src(self) -> torch.Tensor:
        return self.edges[self._only()[1]][0]

    @property
    def dst(self) -> torch.Tensor:
        return self.edges[self._only()[1]][1]

    @property
    def num_edges(self) -> int:
        return sum(int(s.numel()) for s, _ in self.edges.values())

    def triple(self, etype: str) -> tuple[str, str, str]:
        if etype in self.etype_triples:
            return self.etype_triples[etype]
        parts = etype.split("__")
        if len(parts) != 3:
            raise ValueError(f"edge type {etype!r} is not of the form src__rel__dst")
        return parts[0], parts[1], parts[2]

    # ---- helpers for layers ----------------------------------------------------------------
    def split_by_type(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """Cut flat source features (ntypes order) into per-type tensors."""
        sizes = [self.src_counts[t] for t in self.ntypes]
        if x.shape[0] != sum(sizes):
            raise ValueError(f"features have {x.shape[0]} rows, block has {sum(sizes)} source nodes")
        return dict(zip(self.ntypes, torch.split(x, sizes)))

    def csr(self, etype: str) -> torch.Tensor:
        """Row pointer over destination nodes for `etype` (edges are sorted by dst)."""
        if etype not in self._csr:
            _, dst = self.edges[etype]
            num_dst = self.dst_counts[self.triple(etype)[2]]
            counts = torch.bincount(dst, minlength=num_dst)
            crow = torch.zeros(num_dst + 1, dtype=torch.int64, device=dst.device)
            torch.cumsum(counts, 0, out=crow[1:])
            self._csr[etype] = crow
        return self._csr[etype]

    def to(self, device, non_blocking: bool = False) -> "Block":
        return Block(list(self.ntypes), dict(self.src_counts), dict(self.dst_counts),
                     {k: (s.to(device, non_blocking=non_blocking), d.to(device, non_blocking=non_blocking))
                      for k, (s, d) in self.edges.items()}, dict(self.etype_triples))

    def pin_memory(self) -> "Block":
        return Block(list(self.ntypes), dict(self.src_counts), dict(self.dst_counts),
                     {k: (s.pin_memory(), d.pin_memory()) for k, (s, d) in self.edges.items()},
                     dict(self.etype_triples))

    def __repr__(self) -> str:
        return (f"Block(src={self.src_counts}, dst={self.dst_counts}, edges="
                f"{ {k: int(s.numel()) for k, (s, _) in self.edges.items()} })")


def batch_edges(blocks) -> int:
    """Edges of a batch's blocks: lsm-gnn's index blocks (`.edges` by relation) or DGL blocks."""
    total = 0
    for b in blocks:
        edges = getattr(b, "edges", None)
        if isinstance(edges, dict):
            total += sum(int(src.shape[0]) for src, _ in edges.values())
        else:
            total += int(b.num_edges())
    return total
