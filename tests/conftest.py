"""Shared test fixtures and the GPU marker. Tests are seeded, download nothing and need no GPU
(GPU-only tests are `@pytest.mark.gpu` and skip here)."""

from __future__ import annotations

import os

os.environ.setdefault("DGLBACKEND", "pytorch")

import numpy as np
import pytest

from lsm_gnn.datasets.format import Dataset, DatasetWriter


def _build_random_dataset(root, num_nodes=2000, avg_degree=8, dim=128, dtype="float32",
                          num_classes=5, seed=0) -> Dataset:
    """A small homogeneous dataset with a symmetric random graph and class-dependent features."""
    rng = np.random.default_rng(seed)
    m = num_nodes * avg_degree // 2
    src = rng.integers(0, num_nodes, m)
    dst = rng.integers(0, num_nodes, m)
    keep = src != dst
    src, dst = src[keep], dst[keep]
    labels = rng.integers(0, num_classes, num_nodes)
    centroids = rng.normal(size=(num_classes, dim))
    feats = (centroids[labels] + rng.normal(scale=2.0, size=(num_nodes, dim))).astype(dtype)
    perm = rng.permutation(num_nodes)
    a, b = int(0.6 * num_nodes), int(0.8 * num_nodes)
    with DatasetWriter(root, f"random-{num_nodes}") as w:
        w.add_node_type("paper", num_nodes)
        w.add_edges("paper", "cites", "paper", np.concatenate([src, dst]), np.concatenate([dst, src]))
        with w.feature_file(dim, dtype) as f:
            f.write(feats)
        w.set_labels("paper", labels, num_classes)
        w.set_splits(np.sort(perm[:a]), np.sort(perm[a:b]), np.sort(perm[b:]))
        deg = np.bincount(np.concatenate([src, dst]), minlength=num_nodes)
        pr = np.empty(num_nodes, np.uint8)
        pr[np.argsort(deg, kind="stable")] = (255 * np.arange(num_nodes) // max(num_nodes - 1, 1)).astype(np.uint8)
        w.set_static("paper", pr, deg)
        return w.commit()


@pytest.fixture
def random_dataset(tmp_path):
    """Factory: random_dataset(num_nodes=..., dim=..., dtype=...) -> Dataset under tmp_path."""
    counter = iter(range(1000))

    def make(**kw):
        return _build_random_dataset(tmp_path / f"ds{next(counter)}", **kw)

    return make


def pytest_collection_modifyitems(config, items):
    """GPU tests (`@pytest.mark.gpu`, `gpu(devices=N)` for N devices) skip, with one reason, where
    torch.cuda and CuPy see no GPU (lsm_gnn.check.env: the rule `lsm-gnn check gpu` applies too)."""
    marked = [(item, item.get_closest_marker("gpu")) for item in items]
    marked = [(item, m) for item, m in marked if m is not None]
    if not marked:
        return
    from lsm_gnn.check.env import gpu_presence, gpu_skip_reason

    presence = gpu_presence()
    for item, m in marked:
        reason = gpu_skip_reason(int(m.kwargs.get("devices", 1)), presence)
        if reason:
            item.add_marker(pytest.mark.skip(reason=reason))
