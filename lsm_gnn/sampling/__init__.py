"""Neighbour sampling: deterministic multi-layer sampler, lookahead window, background runner."""

from lsm_gnn.sampling.lookahead import Background, Lookahead  # noqa: F401
from lsm_gnn.sampling.sampler import MiniBatch, NeighborSampler, deal_seeds  # noqa: F401
