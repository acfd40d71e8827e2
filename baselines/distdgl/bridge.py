"""lsm-gnn's model code on Dist-DGL's sampled blocks.

Every compared system trains the same model (lsm_gnn.models) with the same optimiser settings;
Dist-DGL's blocks are DGL message-flow graphs, converted here to the index-based `Block`.
"""

from __future__ import annotations

from lsm_gnn.config import ModelConfig
from lsm_gnn.datasets.format import Dataset
from lsm_gnn.models import Block, build_model as _build


def build_model(model_cfg: dict, dataset_path: str, num_layers: int):
    """The model lsm-gnn would build for this dataset (feature dim, classes) and config."""
    return _build(ModelConfig(**model_cfg), Dataset(dataset_path), num_layers)


def convert_blocks(dgl_blocks) -> list[Block]:
    return [Block.from_dgl(b) for b in dgl_blocks]


def forward(model, blocks: list[Block], x):
    return model(blocks, x)
