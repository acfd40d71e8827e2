"""Block readers read batches of consecutive rows straight into `out` when they can.

The in-place path must give the file's rows, exactly the accounting of the planned reads, and fall
back to the staging buffer (with the same rows) whenever `out` or the batch does not qualify.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from conftest import _build_random_dataset
from lsm_gnn.storage import direct, open_feature_store
from lsm_gnn.storage.base import aligned_empty
from lsm_gnn.utils.errors import DataError

ROWS = 700


@pytest.fixture(scope="module")
def datasets(tmp_path_factory):
    """4 KiB rows, 512 B rows (8 to a block) and 400 B rows padded to a 512 B stride."""
    root = tmp_path_factory.mktemp("inplace")
    return {dim: _build_random_dataset(root / f"d{dim}", num_nodes=ROWS, avg_degree=2, dim=dim, seed=dim + 1)
            for dim in (1024, 128, 100)}


def _unaligned(n, dim):
    """A C-contiguous (n, dim) float32 array that does not start on a 4 KiB boundary."""
    out = aligned_empty((n * dim + 16,), np.float32)[16:16 + n * dim].reshape(n, dim)
    assert out.flags.c_contiguous and out.ctypes.data % 4096 == 64
    return out


def test_aligned_empty():
    for shape, dtype in (((3, 1024), np.float32), ((0, 7), np.float64), ((5,), np.int16)):
        a = aligned_empty(shape, dtype)
        assert a.shape == shape and a.dtype == dtype and a.flags.c_contiguous and a.flags.writeable
        assert a.ctypes.data % 4096 == 0 or a.size == 0
    assert aligned_empty((2, 3), np.uint8, align=512).ctypes.data % 512 == 0


@pytest.mark.parametrize("reader", ["direct", "buffered"])
def test_consecutive_rows_read_into_out(datasets, reader):
    ds = datasets[1024]
    truth = np.array(ds.feature_array())
    with open_feature_store(ds, reader) as store:
        for ids in (np.arange(3, 303), np.arange(ROWS - 100, ROWS), np.array([42]), np.arange(ROWS)):
            before = (store.in_place_batches, store.counters.snapshot())
            plan = store.read_plan(ids)
            got = store.read_rows(ids)  # out=None: an aligned buffer, so the in-place path runs
            assert got.ctypes.data % 4096 == 0
            np.testing.assert_array_equal(got, truth[ids])
            assert store.in_place_batches == before[0] + 1
            c = store.counters
            assert c.io_ops - before[1].io_ops == plan.io_ops  # the same reads the plan would issue
            assert c.bytes_read - before[1].bytes_read == plan.total_bytes == len(ids) * 4096
            assert c.distinct_rows - before[1].distinct_rows == len(ids)
        out = aligned_empty((64, 1024), np.float32)
        assert store.read_rows(np.arange(100, 164), out=out) is out
        np.testing.assert_array_equal(out, truth[100:164])


def test_unaligned_out_takes_staging_for_direct_only(datasets):
    ds = datasets[1024]
    truth = np.array(ds.feature_array())
    ids = np.arange(10, 110)
    for reader, in_place in (("direct", 0), ("buffered", 1)):  # pread without O_DIRECT needs no alignment
        with open_feature_store(ds, reader) as store:
            out = _unaligned(len(ids), 1024)
            store.read_rows(ids, out=out)
            np.testing.assert_array_equal(out, truth[ids])
            assert store.in_place_batches == in_place
            assert (store.counters.io_ops, store.counters.bytes_read) == (1, 100 * 4096)


def test_batches_that_do_not_qualify(datasets):
    truth4k = np.array(datasets[1024].feature_array())
    with open_feature_store(datasets[1024], "direct") as store:
        for ids in (np.array([0, 2, 1, 3]), np.array([0, 0, 3, 3]), np.arange(9, -1, -1)):  # not consecutive
            np.testing.assert_array_equal(store.read_rows(ids), truth4k[ids])
        wide = np.zeros((50, 2048), np.float32)  # not C-contiguous
        store.read_rows(np.arange(50), out=wide[:, :1024])
        np.testing.assert_array_equal(wide[:, :1024], truth4k[:50])
        assert not wide[:, 1024:].any()
        assert store.in_place_batches == 0
    truth512 = np.array(datasets[128].feature_array())
    with open_feature_store(datasets[128], "direct") as store:  # 512 B rows: in place only on block bounds
        for ids, in_place in ((np.arange(8, 88), 1), (np.arange(3, 50), 0), (np.arange(ROWS - 60, ROWS), 0)):
            before = store.in_place_batches
            np.testing.assert_array_equal(store.read_rows(ids), truth512[ids])
            assert store.in_place_batches - before == in_place
        assert store.counters.io_ops == 3 and store.counters.bytes_read == (10 + 7 + 8) * 4096
    truth_pad = np.array(datasets[100].feature_array())
    with open_feature_store(datasets[100], "direct") as store:  # padded rows: never in place
        np.testing.assert_array_equal(store.read_rows(np.arange(0, 64)), truth_pad[:64])
        assert store.in_place_batches == 0


def test_in_place_reads_split_at_max_io_bytes(datasets):
    ds = datasets[1024]
    truth = np.array(ds.feature_array())
    with open_feature_store(ds, "direct", threads=3, max_io_bytes=5 * 4096) as store:
        ids = np.arange(20, 43)  # 23 blocks: reads of 5, 5, 5, 5, 3 blocks
        np.testing.assert_array_equal(store.read_rows(ids), truth[ids])
        assert store.in_place_batches == 1
        assert (store.counters.io_ops, store.counters.bytes_read) == (5, 23 * 4096)
        assert store.read_plan(ids).lengths.tolist() == [5 * 4096] * 4 + [3 * 4096]


def test_in_place_short_read_is_retried(datasets, monkeypatch):
    ds = datasets[1024]
    truth = np.array(ds.feature_array())
    real = direct._native_reads

    def half(fd, base, buf, offs, boffs, lens, start, step, got, *rest):
        real(fd, base, buf, offs, boffs, lens, start, step, got, *rest)
        if start == 0 and got[0] == lens[0]:  # the first read came back half done, the rest garbage
            got[0] = lens[0] // 2
            buf[boffs[0] + lens[0] // 2: boffs[0] + lens[0]] = 0xFF

    monkeypatch.setattr(direct, "_native_reads", half)
    with open_feature_store(ds, "direct", backend="threads", threads=2, max_io_bytes=8 * 4096) as store:
        ids = np.arange(100, 132)  # 4 reads of 8 blocks
        np.testing.assert_array_equal(store.read_rows(ids), truth[ids])
        assert store.in_place_batches == 1 and store.counters.io_ops == 4 + 1


@pytest.mark.parametrize("reader", ["direct", "buffered"])
def test_in_place_past_end_of_file_is_an_error(tmp_path, reader):
    ds = _build_random_dataset(tmp_path / "ds", num_nodes=300, avg_degree=2, dim=1024)
    path = ds.features().path
    truth = np.array(ds.feature_array())
    with open_feature_store(ds, reader) as store:
        os.truncate(path, 4096 * 100)
        np.testing.assert_array_equal(store.read_rows(np.arange(90, 100)), truth[90:100])
        with pytest.raises(DataError, match="ends before its metadata says") as e:
            store.read_rows(np.arange(90, 110))  # a short read, then end of file: never zeros
        assert str(path) in str(e.value)


@pytest.mark.parametrize("reader", ["direct", "buffered"])
def test_distinct_rows_in_increasing_order_read_into_out_when_each_row_is_whole_blocks(datasets, reader, monkeypatch):
    ds = datasets[1024]
    truth = np.array(ds.feature_array())
    rng = np.random.default_rng(7)
    with open_feature_store(ds, reader) as store:
        for ids in (np.sort(rng.choice(ROWS, 150, replace=False)), np.array([1, 5, 6, 7, 600, 699])):
            before = (store.in_place_batches, store.counters.snapshot())
            plan = store.read_plan(ids)
            out = store.empty_rows(len(ids))
            assert store.read_rows(ids, out=out) is out
            np.testing.assert_array_equal(out, truth[ids])
            assert store.in_place_batches == before[0] + 1 and store._staging.size == 0   # never allocated
            c = store.counters
            assert c.io_ops - before[1].io_ops == plan.io_ops  # the plan's reads (adjacent rows merged)
            assert c.bytes_read - before[1].bytes_read == plan.total_bytes == len(ids) * 4096
        ids = np.sort(rng.choice(ROWS, 40, replace=False))
        for other in (ids[::-1].copy(), np.concatenate([ids, ids[:1]])):   # not increasing: staging
            n = store.in_place_batches
            np.testing.assert_array_equal(store.read_rows(other), truth[other])
            assert store.in_place_batches == n
        monkeypatch.setattr(type(store), "sparse_in_place", False)   # the benchmark's baseline
        n = store.in_place_batches
        np.testing.assert_array_equal(store.read_rows(ids), truth[ids])
        assert store.in_place_batches == n


def test_distinct_rows_smaller_than_a_block_or_an_unaligned_out_go_through_staging(datasets):
    ids = np.array([3, 20, 21, 400])
    truth512 = np.array(datasets[128].feature_array())
    with open_feature_store(datasets[128], "direct") as store:   # 8 rows to a block: they share blocks
        np.testing.assert_array_equal(store.read_rows(ids), truth512[ids])
        assert store.in_place_batches == 0
    truth4k = np.array(datasets[1024].feature_array())
    with open_feature_store(datasets[1024], "direct") as store:   # O_DIRECT needs an aligned out
        out = _unaligned(len(ids), 1024)
        store.read_rows(ids, out=out)
        np.testing.assert_array_equal(out, truth4k[ids])
        assert store.in_place_batches == 0


def test_bench_inplace_measures_both_paths_on_the_same_store_and_refuses_rows_that_are_not_whole_blocks(datasets):
    import json

    from click.testing import CliRunner

    from lsm_gnn.bench.inplace import bench_inplace

    run = CliRunner().invoke(bench_inplace, [str(datasets[1024].root), "--batch-sizes", "64", "--seconds", "0",
                                             "--repeats", "2", "--json"])
    assert run.exit_code == 0, run.output
    obj = json.loads(run.output)
    assert [(p["reader"], p["batch_size"]) for p in obj["points"]] == [("direct", 64), ("buffered", 64)]
    for p in obj["points"]:
        assert p["ratio"]["runs"] == 2 and p["rows_per_s_in_place"]["median"] > 0
        assert p["cpu_ratio"]["runs"] == 2 and p["cpu_us_per_row_staging"]["median"] > 0
    bad = CliRunner().invoke(bench_inplace, [str(datasets[100].root), "--seconds", "0", "--repeats", "1"])
    assert bad.exit_code != 0 and "are not whole 4096 B blocks" in bad.output
