"""GNN models in plain PyTorch on the index-based block representation (CPU and CUDA alike).

Homogeneous: `sage` (GraphSAGE, mean), `gcn`, `gat`. Heterogeneous: `rgcn`, `rsage`, `rgat`.
`build_model(cfg.model, dataset, num_layers)` picks one and checks it fits the dataset.
"""

from __future__ import annotations

from lsm_gnn.models.blocks import Block  # noqa: F401
from lsm_gnn.models.hetero import RGAT, RGCN, RSAGE
from lsm_gnn.models.homogeneous import GAT, GCN, SAGE
from lsm_gnn.utils.errors import ConfigError

HOMOGENEOUS = {"sage": SAGE, "gcn": GCN, "gat": GAT}
HETEROGENEOUS = {"rgcn": RGCN, "rsage": RSAGE, "rgat": RGAT}
MODELS = {**HOMOGENEOUS, **HETEROGENEOUS}


def build_model(model_cfg, dataset, num_layers: int, source: str = "<config>"):
    """A model for `dataset` (feature dim, classes, node/edge types) from a ModelConfig."""
    name = model_cfg.name
    if name not in MODELS:
        raise ConfigError(source, "model.name", f"unknown model {name!r}; choose one of {sorted(MODELS)}")
    # a relational model on a homogeneous graph is legal (one relation); the reverse is not
    if not dataset.is_homogeneous and name in HOMOGENEOUS:
        raise ConfigError(source, "model.name",
                          f"{name!r} is for homogeneous graphs but {dataset.root} has node types "
                          f"{dataset.node_types} and {len(dataset.edge_types)} edge types; "
                          f"use one of {sorted(HETEROGENEOUS)}")
    lay = dataset.features()
    kw = dict(in_dim=lay.dim, hidden=model_cfg.hidden, num_classes=dataset.num_classes,
              num_layers=num_layers, dropout=model_cfg.dropout, heads=model_cfg.heads)
    if name in HETEROGENEOUS:
        kw.update(ntypes=list(lay.type_offsets), etypes=list(dataset.edge_types), label_type=dataset.label_type)
    return MODELS[name](**kw)
