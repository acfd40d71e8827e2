"""GPU paths: import-safe without a GPU, with a clear error; checked against the host reader with one."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import _build_random_dataset
from lsm_gnn.storage import gpu, open_feature_store
from lsm_gnn.utils.errors import InputError


@pytest.fixture
def ds(tmp_path):
    return _build_random_dataset(tmp_path / "ds", num_nodes=256, avg_degree=2, dim=128)


@pytest.mark.skipif(gpu.cuda_available(), reason="checks the no-GPU behaviour")
def test_no_gpu_is_a_clear_error(ds):
    with pytest.raises(InputError, match="needs a CUDA device"):
        open_feature_store(ds, "gpu")
    ok, why = gpu.kvikio_status(ds.features().path)
    assert ok is False and why


@pytest.mark.gpu
def test_gpu_rows_equal_host_rows(ds):  # pragma: no cover - runs on GPU machines only
    ids = np.random.default_rng(0).integers(0, 256, 300)
    truth = np.array(ds.feature_array())[ids]
    with open_feature_store(ds, "gpu", transfer="pinned") as store:
        rows = store.read_rows(ids)
        assert rows.is_cuda
        np.testing.assert_array_equal(rows.cpu().numpy(), truth)
        assert store.path_info["transfer"] == "pinned" and store.h2d_bytes == 300 * 512
