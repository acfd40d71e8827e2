"""Dist-DGL (dgl 1.1.3 `dgl.distributed`) as a baseline: partitioning (`partition`), an emulated
cluster of M machines x T trainers on one host (`launch`), and the trainer entry point (`trainer`)
that trains lsm-gnn's own model code on Dist-DGL's sampled blocks."""
