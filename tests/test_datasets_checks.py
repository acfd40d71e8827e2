"""Every input checked where it is opened: one checker for open and verify, row checksums verified
on read, non-finite rows and losses named, a window longer than the epoch refused, traces checked."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from lsm_gnn.datasets import checksums
from lsm_gnn.datasets.checks import check
from lsm_gnn.datasets.format import CHECKSUM_FILE, METADATA_HASH_FILE, Dataset
from lsm_gnn.datasets.synthetic import generate
from lsm_gnn.datasets.verify import errors, verify, write_checksums
from lsm_gnn.storage.open import open_feature_store
from lsm_gnn.utils.errors import DataError

ET = "topology/paper__cites__paper"


@pytest.fixture
def ds(tmp_path):
    return generate(tmp_path / "ds", 600, seed=2, feature_dim=8, progress=False)


def _edit_meta(root, fn):
    meta = json.loads((root / "metadata.json").read_text())
    fn(meta)
    (root / "metadata.json").write_text(json.dumps(meta))


def _flip(path, offset):
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0x10]))


def _err(fn) -> DataError:
    with pytest.raises(DataError) as e:
        fn()
    return e.value


# ---- one checker ---------------------------------------------------------------------------------
def test_an_int32_feature_dtype_is_refused_on_open_and_by_verify(ds):
    _edit_meta(ds.root, lambda m: m["features"].update(dtype="int32"))  # same itemsize: the layout still fits
    e = _err(lambda: Dataset(ds.root))
    assert e.path.endswith("metadata.json")
    assert "field features.dtype" in str(e) and "float32, float16, float64" in str(e) and "'int32'" in str(e)
    files = {p.file for p in errors(verify(ds.root, quick=True))}
    assert files == {"metadata.json"}  # the dtype, and metadata.json no longer matching metadata.sha256
    msgs = [p.message for p in verify(ds.root, quick=True)]
    assert any("features.dtype" in m for m in msgs) and any(METADATA_HASH_FILE in m for m in msgs)


def test_open_raises_the_first_of_all_the_problems_verify_reports(ds):
    _edit_meta(ds.root, lambda m: (m["features"].update(row_stride=48), m["labels"].update(num_classes=0)))
    found = [p for p in check(ds.root, "open")]
    assert "features.row_stride: expected 32, found 48" in found[0].message and found[0].file == "metadata.json"
    assert any(p.file == "features.bin" and "too small" in p.message for p in found)  # 600 rows of 48 bytes
    assert any(p.file == "metadata.json" and "labels.num_classes" in p.message for p in found)
    assert str(_err(lambda: Dataset(ds.root))).endswith(found[0].message)
    assert {p.message for p in found} <= {p.message for p in verify(ds.root, quick=True)}


def test_a_non_monotone_csc_indptr_is_an_error_naming_the_file_when_loaded(ds):
    p = ds.root / f"{ET}/csc_indptr.npy"
    ip = np.load(p)
    ip[10], ip[11] = ip[11] + 1, ip[10]
    np.save(p, ip)
    d = Dataset(ds.root)  # the ends are right: opening stays O(1)
    e = _err(lambda: d.csc("paper__cites__paper"))
    assert e.path == str(p) and "not monotone: indptr[11]" in str(e)


def test_a_csc_index_out_of_range_is_blamed_on_csc_indices_not_on_features(ds):
    p = ds.root / f"{ET}/csc_indices.npy"
    ix = np.load(p)
    ix[5] = 600
    np.save(p, ix)
    e = _err(lambda: Dataset(ds.root).csc("paper__cites__paper"))
    assert e.path == str(p) and "id out of range: entry 5 is 600, expected [0, 600)" in str(e)


def test_a_label_out_of_range_is_an_error_when_the_labels_are_loaded(ds):
    p = ds.root / "labels/paper.npy"
    y = np.load(p)
    y[3] = 19
    np.save(p, y)
    e = _err(lambda: Dataset(ds.root).labels())
    assert e.path == str(p) and "node 3 has 19, expected -1 or [0, 19)" in str(e)


def test_a_hand_edited_metadata_json_fails_verify_against_metadata_sha256(ds):
    _edit_meta(ds.root, lambda m: m.update(name="renamed"))  # harmless to open, but not what was written
    Dataset(ds.root)
    bad = errors(verify(ds.root, quick=True))
    assert [p.file for p in bad] == ["metadata.json"] and "metadata.sha256" in bad[0].message


# ---- row checksums ---------------------------------------------------------------------------------
@pytest.mark.parametrize("reader", ["direct", "buffered", "mmap", "memory"])
def test_a_flipped_feature_byte_is_an_error_naming_the_file_and_the_row(ds, reader):
    lay = ds.features()
    _flip(lay.path, 17 * lay.row_stride + 5)
    d = Dataset(ds.root)
    if reader == "memory":  # reads the whole file, checking every row as it loads
        e = _err(lambda: open_feature_store(d, reader))
    else:
        with open_feature_store(d, reader) as store:
            assert store.checksum_state == "verified"
            store.read_rows(np.array([3, 16, 18]))  # rows beside it are sound
            e = _err(lambda: store.read_rows(np.array([40, 17, 2])))
    assert e.path == str(lay.path) and "row 17 fails its xxh3_64 checksum" in str(e)


def test_the_in_memory_ideal_checks_every_row_as_it_loads(ds):
    lay = ds.features()
    assert np.array_equal(lay.load_rows(), ds.feature_array())
    from lsm_gnn.datasets.checksums import identity_rows

    row = max(set(range(lay.num_rows)) - set(identity_rows(lay.num_rows).tolist()))  # not read when opened
    _flip(lay.path, row * lay.row_stride)
    e = _err(lambda: Dataset(ds.root).features().load_rows())
    assert e.path == str(lay.path) and f"row {row} fails" in str(e)
    Dataset(ds.root).features().load_rows(verify=False)


def test_checksums_can_be_turned_off_and_the_store_says_so(ds):
    lay = ds.features()
    _flip(lay.path, 17 * lay.row_stride + 5)
    with open_feature_store(Dataset(ds.root), "direct", verify_checksums=False) as store:
        store.read_rows(np.array([17]))
        assert store.checksum_state == "off"
    assert "1 rows differ from their xxh3_64 checksums" in " ".join(p.message for p in verify(ds.root))


def test_owner_files_are_verified_with_the_global_row_named(ds, tmp_path):
    from lsm_gnn.multidevice.owner_files import ensure_owner_files
    from lsm_gnn.storage.open import owner_row_map

    layouts = ensure_owner_files(ds, 2, out_dir=tmp_path / "own", progress=False)
    assert np.array_equal(layouts[1].checksums, ds.features().checksums[1::2])
    _flip(layouts[1].path, 8 * layouts[1].row_stride)  # local row 8 of owner 1 = node 17
    with open_feature_store(layouts[1], "direct", row_map=owner_row_map(1, 2)) as store:
        e = _err(lambda: store.read_rows(np.array([1, 17, 33])))
    assert e.path == str(layouts[1].path) and "row 8 (node 17) fails" in str(e)


def test_owner_files_are_not_copied_from_a_corrupt_row(ds, tmp_path):
    from lsm_gnn.multidevice.owner_files import ensure_owner_files

    lay = ds.features()
    _flip(lay.path, 17 * lay.row_stride)
    e = _err(lambda: ensure_owner_files(Dataset(ds.root), 2, out_dir=tmp_path / "own", progress=False))
    assert e.path == str(lay.path) and "row 17 fails" in str(e)


def test_every_writer_stores_row_checksums(ds, tmp_path, random_dataset):
    from lsm_gnn.datasets.importer import import_graph

    np.save(tmp_path / "e.npy", np.array([[i, (i * 7 + 1) % 300] for i in range(300)]))
    made = [ds, random_dataset(num_nodes=300, dim=100), import_graph(tmp_path / "imp", tmp_path / "e.npy",
                                                                     feature_dim=4, progress=False)]
    for d in made:
        lay = d.features()
        assert lay.checksums is not None and (d.root / METADATA_HASH_FILE).is_file()
        want = checksums.file_checksums(lay.path, lay.num_rows, lay.row_stride, lay.row_bytes)
        assert np.array_equal(lay.checksums, want)
        assert verify(d.root) == []


def test_an_old_dataset_without_checksums_warns_and_write_checksums_upgrades_it(ds):
    (ds.root / CHECKSUM_FILE).unlink()
    (ds.root / METADATA_HASH_FILE).unlink()

    def drop(m):
        del m["features"]["checksums"]
        del m["files"][CHECKSUM_FILE]
    _edit_meta(ds.root, drop)
    with pytest.warns(UserWarning, match="no row checksums"):
        d = Dataset(ds.root)
    assert d.features().checksums is None
    with open_feature_store(d, "direct") as store:
        assert store.checksum_state == "absent"
        store.read_rows(np.arange(10))
    found = verify(ds.root)
    assert found and not errors(found) and {p.severity for p in found} == {"warning"}
    assert write_checksums(ds.root) == []
    assert verify(ds.root) == []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert Dataset(ds.root).features().checksums is not None


def test_write_checksums_refuses_a_corrupt_dataset(ds):
    lay = ds.features()
    (ds.root / CHECKSUM_FILE).unlink()
    _edit_meta(ds.root, lambda m: (m["features"].pop("checksums"), m["files"].pop(CHECKSUM_FILE)))
    _flip(lay.path, 3)
    blocked = write_checksums(ds.root)
    assert any(p.file == "features.bin" and "sha256" in p.message for p in blocked)
    assert not (ds.root / CHECKSUM_FILE).exists()


def test_the_cli_upgrade_and_verify_exit_statuses(ds):
    from click.testing import CliRunner

    from lsm_gnn.cli import cli

    (ds.root / METADATA_HASH_FILE).unlink()
    r = CliRunner().invoke(cli, ["dataset", "verify", str(ds.root), "--quick"])
    assert r.exit_code == 0 and "warning: missing: metadata.json is covered by no checksum" in r.output
    r = CliRunner().invoke(cli, ["dataset", "verify", str(ds.root), "--write-checksums", "--no-progress"])
    assert r.exit_code == 0 and "OK (full check)" in r.output


# ---- traces ------------------------------------------------------------------------------------
def test_a_truncated_or_inconsistent_trace_is_a_data_error(tmp_path):
    from lsm_gnn.sim.trace import Trace

    t = Trace(2, 100, [[np.arange(5), np.arange(3)] for _ in range(4)])
    p = tmp_path / "t.npz"
    t.save(p)
    assert Trace.load(p).num_batches == 4
    cut = tmp_path / "cut.npz"
    cut.write_bytes(p.read_bytes()[:200])
    e = _err(lambda: Trace.load(cut))
    assert e.path == str(cut) and "truncated" in str(e)
    t.batches[1][0] = np.array([3, 100])
    t.save(p)
    assert "ids: id out of range: entry 9 is 100, expected [0, 100)" in str(_err(lambda: Trace.load(p)))


# ---- the training loop -------------------------------------------------------------------------
def _train_cfg(d, **over):
    from lsm_gnn.config import load_config

    base = {"dataset.path": str(d.root), "storage.reader": "direct", "cache.enabled": False,
            "sampler.batch_size": 64, "sampler.fanouts": [4, 4], "model.hidden": 8, "train.epochs": 1,
            "train.eval": False, "train.threads": 1}
    base.update(over)
    return load_config(None, base)


def test_a_nan_in_a_feature_row_stops_training_naming_the_row(random_dataset, tmp_path):
    from lsm_gnn.train.loop import run_training

    d = random_dataset(num_nodes=300, dim=16)
    hub = int(np.argmax(np.load(d.root / "static/paper.degree.npy")))
    lay = d.features()
    rows = np.memmap(lay.path, dtype=np.float32, mode="r+")
    rows[hub * lay.row_stride // 4 + 2] = np.nan
    rows.flush()
    del rows
    with pytest.raises(DataError, match=f"row {hub} fails its xxh3_64 checksum"):
        run_training(_train_cfg(d), progress=False)
    # with checksums that vouch for the NaN (rewritten), the loss check still names the row
    (d.root / CHECKSUM_FILE).unlink()
    _edit_meta(d.root, lambda m: (m["features"].pop("checksums"), m["files"].pop(CHECKSUM_FILE)))
    rec = tmp_path / "r.json"
    with pytest.warns(UserWarning), pytest.raises(DataError, match=f"row {hub} holds non-finite values") as e:
        run_training(_train_cfg(d, **{"output.record": str(rec)}), progress=False)
    assert e.value.path == str(lay.path) and "the loss is nan" in str(e.value)
    assert json.loads(rec.read_text())["status"] == "failed"


def test_a_window_longer_than_the_epoch_is_clamped_and_the_record_says_so(random_dataset, capsys):
    from lsm_gnn.train.loop import run_training

    d = random_dataset(num_nodes=300, dim=16)  # 180 training seeds: 3 batches of 64
    rec = run_training(_train_cfg(d, **{"cache.enabled": True, "cache.window": 50, "storage.reader": "buffered"}),
                       progress=False)
    src = rec["metrics"]["source"]
    assert src["window"] == 3 and src["window_clamp"] == {"requested": 50, "used": 3, "iterations_per_epoch": 3}
    assert rec["config"]["cache"]["window"] == 50  # what was asked stays in the config
    from lsm_gnn.cli.train import _summary

    _summary(rec, "r.json", as_json=False)
    assert "note: cache.window 50 is longer than the 3 iterations of an epoch; the run used 3" in capsys.readouterr().out
    rec = run_training(_train_cfg(d, **{"cache.enabled": True, "cache.window": 3, "storage.reader": "buffered"}),
                       progress=False)
    assert rec["metrics"]["source"]["window_clamp"] is None
