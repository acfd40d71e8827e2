"""Feature stores: rows read equal the file's rows on every reader; accounting is exact."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import _build_random_dataset
from lsm_gnn.config import StorageConfig
from lsm_gnn.datasets.format import Dataset
from lsm_gnn.storage import open_feature_store, open_from_config, owner_row_map
from lsm_gnn.storage.aio import aio_status
from lsm_gnn.storage.base import distinct_blocks, plan_reads

READERS = ["direct", "buffered", "mmap", "memory"]
ROWS = 700


@pytest.fixture(scope="module")
def datasets(tmp_path_factory):
    """Datasets with 512 B rows, 4 KiB rows, 400 B rows (padded) and 4400 B rows (straddling)."""
    root = tmp_path_factory.mktemp("storage")
    return {dim: _build_random_dataset(root / f"d{dim}", num_nodes=ROWS, avg_degree=2, dim=dim, seed=dim)
            for dim in (128, 1024, 100, 1100)}


def _id_lists(n):
    rng = np.random.default_rng(7)
    return {
        "random": rng.integers(0, n, 300),
        "duplicates": np.array([5, 5, 5, 0, 5, n - 1, n - 1, 0]),
        "unsorted": rng.permutation(n)[:250],
        "empty": np.array([], dtype=np.int64),
        "all_sorted": np.arange(n),
        "single_last": np.array([n - 1]),
        "int32": rng.integers(0, n, 50).astype(np.int32),
        "uint16": rng.integers(0, n, 50).astype(np.uint16),
    }


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("dim", [128, 1024, 100, 1100])
def test_rows_equal_file(datasets, reader, dim):
    ds = datasets[dim]
    truth = np.array(ds.feature_array())
    with open_feature_store(ds, reader) as store:
        assert store.path_info["reader"] == reader
        for name, ids in _id_lists(ROWS).items():
            got = store.read_rows(ids)
            assert got.shape == (len(ids), dim) and got.dtype == np.float32, name
            np.testing.assert_array_equal(got, truth[np.asarray(ids, dtype=np.int64)], err_msg=name)


@pytest.mark.parametrize("reader", READERS)
def test_out_buffer_filled_in_place(datasets, reader):
    ds = datasets[1024]
    truth = np.array(ds.feature_array())
    ids = np.array([9, 3, 9, 600])
    with open_feature_store(ds, reader) as store:
        out = np.full((4, 1024), -1.0, np.float32)
        assert store.read_rows(ids, out=out) is out
        np.testing.assert_array_equal(out, truth[ids])
        wide = np.zeros((4, 2048), np.float32)  # a non-contiguous row view
        store.read_rows(ids, out=wide[:, :1024])
        np.testing.assert_array_equal(wide[:, :1024], truth[ids])
        assert not wide[:, 1024:].any()


AIO = pytest.mark.skipif(not aio_status()[0], reason=f"native AIO unavailable: {aio_status()[1]}")


@pytest.mark.parametrize("backend,depth_key", [("threads", "threads"), pytest.param("aio", "queue_depth", marks=AIO)])
def test_direct_backends_at_every_depth(datasets, backend, depth_key):
    ds = datasets[1024]
    truth = np.array(ds.feature_array())
    ids = np.random.default_rng(3).integers(0, ROWS, 700)
    for depth in (1, 3, 128):
        with open_feature_store(ds, "direct", backend=backend, max_io_bytes=8192, **{depth_key: depth}) as store:
            np.testing.assert_array_equal(store.read_rows(ids), truth[ids])
            np.testing.assert_array_equal(store.read_rows(ids[:1]), truth[ids[:1]])
            assert store.path_info == {"reader": "direct", "backend": backend, "queue_depth": depth,
                                       "o_direct": True, "block_size": 4096, "max_io_bytes": 8192,
                                       "file": str(ds.features().path)}
            assert store.counters.io_ops == len(store.read_plan(ids).lengths) + 1


@AIO
def test_auto_backend_is_aio_for_o_direct_only(datasets):
    with open_feature_store(datasets[1024], "direct") as store:
        assert store.path_info["backend"] == "aio"
    with open_feature_store(datasets[1024], "buffered") as store:  # buffered AIO would block in io_submit
        assert store.path_info["backend"] == "threads"


# ---- accounting, against hand-computed cases ------------------------------------------------

def test_accounting_512_byte_rows(datasets):
    ds = datasets[128]  # 512 B rows, 8 to a 4 KiB block
    ids = np.array([0, 1, 7, 8, 8, 100])  # blocks 0, 0, 0, 1, 1, 12 -> reads [0-1] and [12]
    for reader in ("direct", "buffered"):
        with open_feature_store(ds, reader) as store:
            store.read_rows(ids)
            c = store.counters
            assert (c.rows_requested, c.distinct_rows, c.io_ops, c.bytes_read) == (6, 5, 2, 3 * 4096)
            assert c.useful_bytes == 5 * 512 and c.read_amplification == pytest.approx(12288 / 2560)
            assert c.batches == 1 and c.seconds > 0
            store.read_rows(np.array([3]))  # counters accumulate
            assert (c.rows_requested, c.distinct_rows, c.io_ops, c.bytes_read, c.batches) == (7, 6, 3, 4 * 4096, 2)
    with open_feature_store(ds, "mmap") as store:  # one operation per distinct page
        store.read_rows(ids)
        assert (store.counters.io_ops, store.counters.bytes_read, store.counters.distinct_rows) == (3, 3 * 4096, 5)
    with open_feature_store(ds, "memory") as store:
        store.read_rows(ids)
        c = store.counters
        assert (c.rows_requested, c.distinct_rows, c.io_ops, c.bytes_read) == (6, 5, 0, 0)


def test_accounting_4k_rows_merge_and_split(datasets):
    ds = datasets[1024]
    with open_feature_store(ds, "direct") as store:
        store.read_rows(np.array([3, 4, 5, 10, 3]))  # [3-5] merged, [10]
        assert (store.counters.io_ops, store.counters.bytes_read, store.counters.distinct_rows) == (2, 4 * 4096, 4)
    with open_feature_store(ds, "direct", max_io_bytes=8192) as store:
        store.read_rows(np.arange(10)[::-1])  # one run of 10 blocks cut into reads of 2
        assert (store.counters.io_ops, store.counters.bytes_read) == (5, 10 * 4096)
    with open_feature_store(ds, "direct") as store:
        store.read_rows(np.array([], dtype=np.int64))
        c = store.counters
        assert (c.rows_requested, c.distinct_rows, c.io_ops, c.bytes_read, c.batches) == (0, 0, 0, 0, 1)


def test_accounting_straddling_rows(datasets):
    ds = datasets[1100]  # 4400 B rows at a 4608 B stride: row 0 = blocks 0-1, row 1 = blocks 1-2
    with open_feature_store(ds, "direct") as store:
        store.read_rows(np.array([1, 0]))
        assert (store.counters.io_ops, store.counters.bytes_read) == (1, 3 * 4096)
    with open_feature_store(ds, "direct", max_io_bytes=4096) as store:  # every read one block: rows split
        truth = np.array(ds.feature_array())
        np.testing.assert_array_equal(store.read_rows(np.array([1, 0, 1])), truth[[1, 0, 1]])
        assert (store.counters.io_ops, store.counters.bytes_read) == (3, 3 * 4096)


def test_plan_arithmetic():
    rows = np.array([0, 1, 9, 16, 17])  # 512 B rows: blocks 0, 0, 1, 2, 2
    plan = plan_reads(rows, 512, 512, 4096)
    assert plan.file_offsets.tolist() == [0] and plan.lengths.tolist() == [3 * 4096]
    assert plan.row_pos.tolist() == [0, 512, 4096 + 512, 8192, 8192 + 512]
    plan = plan_reads(np.array([2, 50]), 4096, 4096, 4096)
    assert plan.file_offsets.tolist() == [8192, 50 * 4096] and plan.buf_offsets.tolist() == [0, 4096]
    assert plan.row_pos.tolist() == [0, 4096] and plan.blocks == 2 and plan.io_ops == 2
    assert distinct_blocks(np.array([0, 1]), 4608, 4400, 4096).tolist() == [0, 1, 2]
    assert plan_reads(np.array([], np.int64), 512, 512).total_bytes == 0


# ---- per-owner files and configuration ------------------------------------------------------

def test_owner_row_map(tmp_path, datasets):
    from lsm_gnn.datasets.format import FeatureLayout
    from lsm_gnn.utils.errors import InputError

    full = np.array(datasets[128].feature_array())
    owner, G = 1, 3
    local = np.ascontiguousarray(full[owner::G])  # owner 1's rows, in its own file (same format)
    path = tmp_path / "owner1.bin"
    raw = local.tobytes()
    path.write_bytes(raw + b"\0" * (-len(raw) % 4096))
    lay = FeatureLayout(path=path, num_rows=len(local), dim=128, dtype=np.dtype("float32"), row_bytes=512,
                        row_stride=512, file_bytes=path.stat().st_size, type_offsets={"paper": 0})
    ids = np.array([1, 4, 1, 697, 10])
    for reader in READERS:
        with open_feature_store(lay, reader, row_map=owner_row_map(owner, G)) as store:
            np.testing.assert_array_equal(store.read_rows(ids), full[ids])
            with pytest.raises(InputError, match="belongs to owner 2"):
                store.read_rows(np.array([2]))
    with pytest.raises(InputError, match="out of range"):
        owner_row_map(3, 3)


def test_open_from_config(datasets):
    cfg = StorageConfig(reader="buffered", threads=4, max_io_bytes=8192, drop_page_cache=True)
    with open_from_config(datasets[128], cfg) as store:
        assert store.path_info["reader"] == "buffered" and store.path_info["queue_depth"] == 4
        assert store.path_info["max_io_bytes"] == 8192
    with open_feature_store(str(datasets[128].root), "mmap") as store:  # a dataset path works too
        assert store.read_rows([1]).shape == (1, 128)


def test_memory_store_from_array():
    from lsm_gnn.storage.memory import MemoryStore

    feats = np.arange(40, dtype=np.float64).reshape(10, 4)
    store = MemoryStore(feats)
    np.testing.assert_array_equal(store.read_rows([9, 0, 9]), feats[[9, 0, 9]])
    assert store.counters.distinct_rows == 2 and store.path_info["reader"] == "memory"


def test_dataset_reopen(datasets):
    ds = Dataset(datasets[1024].root)
    with open_feature_store(ds, "direct") as store:
        assert store.num_rows == ROWS and store.dim == 1024
