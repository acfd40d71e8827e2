"""lsm-gnn: storage-based multi-GPU GNN training after LSM-GNN, on a CPU and a GPU engine."""

__version__ = "0.1.0"
