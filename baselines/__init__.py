"""Comparators in lsm-gnn's harness and metrics: plain storage loaders (mmap, direct), the
in-memory ideal, isolated per-device caches and Dist-DGL."""
