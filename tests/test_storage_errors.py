"""Feature stores: every bad input is a clear, documented error naming the file; never zeros."""

from __future__ import annotations

import errno
import os

import numpy as np
import pytest

from conftest import _build_random_dataset
from lsm_gnn.storage import direct, open_feature_store
from lsm_gnn.storage.aio import aio_status
from lsm_gnn.utils.errors import DataError, InputError

READERS = ["direct", "buffered", "mmap", "memory"]


@pytest.fixture
def ds(tmp_path):
    return _build_random_dataset(tmp_path / "ds", num_nodes=300, avg_degree=2, dim=1024)


@pytest.mark.parametrize("reader", READERS)
def test_bad_ids_and_out(ds, reader):
    path = str(ds.features().path)
    with open_feature_store(ds, reader) as store:
        for bad, match in ((np.array([0, 300]), "row 300 .*out of range"), (np.array([-1, 2]), "row -1"),
                           (np.array([1.0, 2.0]), "must be integers"), (np.zeros((2, 2), np.int64), "1-D"),
                           (np.array([2**63], dtype=np.uint64), "out of range"), (np.array([True]), "integers")):
            with pytest.raises(InputError, match=match) as e:
                store.read_rows(bad)
            assert path in str(e.value) or reader == "memory"
        ids = np.array([1, 2])
        for out, match in ((np.empty((2, 1024), np.float64), "dtype float64"), (np.empty((3, 1024), np.float32),
                           "shape"), (np.empty((2, 1024), np.float32)[:, ::-1].copy().T.T[:, :512], "shape"),
                           ([[0.0] * 1024] * 2, "numpy array")):
            with pytest.raises(InputError, match=match):
                store.read_rows(ids, out=out)
        ro = np.empty((2, 1024), np.float32)
        ro.flags.writeable = False
        with pytest.raises(InputError, match="read-only"):
            store.read_rows(ids, out=ro)
        assert store.counters.rows_requested == 0  # nothing was counted for refused calls


@pytest.mark.parametrize("reader", READERS)
def test_file_shorter_than_metadata(ds, reader):
    path = ds.features().path
    os.truncate(path, 4096 * 100)
    with pytest.raises(DataError, match="shorter than its metadata") as e:
        open_feature_store(ds, reader)
    assert str(path) in str(e.value)


@pytest.mark.parametrize("reader", ["direct", "buffered"])
def test_file_truncated_after_open_is_not_zeros(ds, reader):
    path = ds.features().path
    truth = np.array(ds.feature_array()[[5]])
    with open_feature_store(ds, reader) as store:
        os.truncate(path, 4096 * 100)
        np.testing.assert_array_equal(store.read_rows([5]), truth)
        with pytest.raises(DataError, match="ends before its metadata says") as e:
            store.read_rows([5, 250])
        assert str(path) in str(e.value)


@pytest.mark.parametrize("reader", READERS)
def test_missing_file(ds, reader):
    path = ds.features().path
    path.unlink()
    with pytest.raises(DataError, match="does not exist|cannot") as e:
        open_feature_store(ds, reader)
    assert str(path) in str(e.value)


@pytest.mark.parametrize("reader", ["direct", "buffered"])
def test_unreadable_file(ds, reader, monkeypatch):
    path = str(ds.features().path)
    real_open = os.open

    def deny(p, flags, *a, **k):  # tests run as root, where chmod 000 still reads
        if os.fspath(p) == path:
            raise PermissionError(errno.EACCES, "Permission denied", path)
        return real_open(p, flags, *a, **k)

    monkeypatch.setattr(os, "open", deny)
    with pytest.raises(DataError, match="cannot open feature file: Permission denied") as e:
        open_feature_store(ds, reader)
    assert path in str(e.value)


def test_mmap_unreadable_file(ds, monkeypatch):
    def deny(*a, **k):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(np, "memmap", deny)
    with pytest.raises(DataError, match="cannot map feature file") as e:
        open_feature_store(ds, "mmap")
    assert str(ds.features().path) in str(e.value)


def _wrap_native(monkeypatch, tamper):
    real = direct._native_reads

    def fake(fd, base, buf, offs, boffs, lens, start, step, got, *rest):
        real(fd, base, buf, offs, boffs, lens, start, step, got, *rest)
        tamper(got, lens, buf, boffs)

    monkeypatch.setattr(direct, "_native_reads", fake)


def test_short_read_is_retried(ds, monkeypatch):
    truth = np.array(ds.feature_array())

    def half(got, lens, buf, boffs):  # the first read came back half done, its second half garbage
        if got[0] == lens[0]:
            got[0] = lens[0] // 2
            buf[boffs[0] + lens[0] // 2: boffs[0] + lens[0]] = 0xFF

    _wrap_native(monkeypatch, half)
    ids = np.array([7, 3, 200, 3])
    with open_feature_store(ds, "direct", backend="threads", threads=1) as store:
        np.testing.assert_array_equal(store.read_rows(ids), truth[ids])
        assert store.counters.io_ops == 3 + 1  # three reads plus the retry of the short one


def test_empty_read_and_io_error_are_errors(ds, monkeypatch):
    def eof(got, lens, buf, boffs):
        got[0] = 0

    _wrap_native(monkeypatch, eof)
    with open_feature_store(ds, "direct", backend="threads", threads=1) as store:
        with pytest.raises(DataError, match="ends before its metadata says"):
            store.read_rows([4])

    def fail(got, lens, buf, boffs):
        got[0] = -1

    _wrap_native(monkeypatch, fail)

    def eio(fd, bufs, off):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(direct, "_preadv", eio)
    with open_feature_store(ds, "direct", backend="threads", threads=1) as store:
        with pytest.raises(DataError, match="failed: Input/output error") as e:
            store.read_rows([4])
        assert str(ds.features().path) in str(e.value)


def test_bad_options(ds):
    with pytest.raises(InputError, match="reader must be one of"):
        open_feature_store(ds, "nvme")
    with pytest.raises(InputError, match="unknown option"):
        open_feature_store(ds, "mmap", depth=4)
    open_feature_store(ds, "mmap", threads=4, backend="auto").close()  # block options ignored
    with pytest.raises(InputError, match="multiple of 512"):
        open_feature_store(ds, "direct", block_size=1000)
    with pytest.raises(InputError, match="backend must be"):
        open_feature_store(ds, "direct", backend="spdk")
    with pytest.raises(InputError, match="expected a Dataset"):
        open_feature_store(42, "direct")


def test_io_uring_unavailable_is_clear(ds):
    ok, why = direct.liburing_status()
    if ok:
        with open_feature_store(ds, "direct", backend="io_uring", queue_depth=8) as store:
            truth = np.array(ds.feature_array())
            np.testing.assert_array_equal(store.read_rows([9, 1, 9, 290]), truth[[9, 1, 9, 290]])
            assert store.path_info["backend"] == "io_uring" and store.path_info["queue_depth"] == 8
    else:
        with pytest.raises(InputError, match="io_uring backend unavailable"):
            open_feature_store(ds, "direct", backend="io_uring")


# ---- the native AIO backend: the same retries and errors -------------------------------------
needs_aio = pytest.mark.skipif(not aio_status()[0], reason=f"native AIO unavailable: {aio_status()[1]}")


def _wrap_aio(monkeypatch, tamper, result=None):
    real = direct.aio_reads

    def fake(ctx, fd, buf, offs, boffs, lens, depth, got, *rest):
        r = real(ctx, fd, buf, offs, boffs, lens, depth, got, *rest)
        tamper(got, lens, buf, boffs)
        return r if result is None else result

    monkeypatch.setattr(direct, "aio_reads", fake)


@needs_aio
def test_aio_short_read_is_retried_and_io_error_is_an_error(ds, monkeypatch):
    truth = np.array(ds.feature_array())

    def half(got, lens, buf, boffs):
        got[0] = lens[0] // 2
        buf[boffs[0] + lens[0] // 2: boffs[0] + lens[0]] = 0xFF

    _wrap_aio(monkeypatch, half)
    ids = np.array([7, 3, 200, 3])
    with open_feature_store(ds, "direct", backend="aio") as store:
        assert store.path_info["backend"] == "aio"
        np.testing.assert_array_equal(store.read_rows(ids), truth[ids])
        assert store.counters.io_ops == 3 + 1

    def eio_result(got, lens, buf, boffs):
        got[0] = -errno.EIO  # what the kernel reports for a failed read

    _wrap_aio(monkeypatch, eio_result)
    monkeypatch.setattr(direct, "_preadv", lambda fd, bufs, off: (_ for _ in ()).throw(OSError(errno.EIO, "Input/output error")))
    with open_feature_store(ds, "direct", backend="aio") as store:
        with pytest.raises(DataError, match="failed: Input/output error"):
            store.read_rows([4])


@needs_aio
def test_aio_reads_it_could_not_issue_or_reap_are_read_synchronously(ds, monkeypatch):
    truth = np.array(ds.feature_array())
    ids = np.array([250, 1, 99, 100])

    def nothing(ctx, fd, buf, offs, boffs, lens, depth, got, *rest):
        return -1  # io_submit refused everything: got stays -1

    monkeypatch.setattr(direct, "aio_reads", nothing)
    with open_feature_store(ds, "direct", backend="aio") as store:
        np.testing.assert_array_equal(store.read_rows(ids), truth[ids])

    def lost(got, lens, buf, boffs):
        got[1] = -1  # still in flight when reaping gave up
    _wrap_aio(monkeypatch, lost, result=-2)
    with open_feature_store(ds, "direct", backend="aio") as store:
        np.testing.assert_array_equal(store.read_rows(ids), truth[ids])
        assert store._aio is None  # the context was destroyed (waiting for its reads), and is made anew
        np.testing.assert_array_equal(store.read_rows(ids[::-1]), truth[ids[::-1]])
