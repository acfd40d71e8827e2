"""`verify` finds each kind of damage and reports it under the damaged file."""

from __future__ import annotations

import json

import numpy as np
import pytest

from lsm_gnn.datasets.synthetic import generate
from lsm_gnn.datasets.verify import Problem, verify

ET = "topology/paper__cites__paper"


@pytest.fixture
def ds(tmp_path):
    return generate(tmp_path / "ds", 600, seed=2, feature_dim=8, progress=False)


def _resave(path, arr):
    np.save(path, arr)  # same name: np.save keeps the .npy suffix


def _files(problems):
    return {p.file for p in problems}


def _has(problems, file, text):
    return any(p.file == file and text in p.message for p in problems), [str(p) for p in problems]


def test_sound_dataset_has_no_problems(ds, random_dataset):
    assert verify(ds.root) == []
    assert verify(ds.root, quick=True) == []
    assert verify(random_dataset(num_nodes=300, dim=100).root) == []  # padded rows (stride 512)


def test_hetero_dataset_has_no_problems(tmp_path):
    h = generate(tmp_path / "h", 800, heterogeneous=True, feature_dim=4, progress=False)
    assert verify(h.root) == []


def test_flipped_feature_byte_is_found_by_the_quick_check_too(ds):
    p = ds.root / "features.bin"
    raw = bytearray(p.read_bytes())
    raw[100] ^= 0x01  # row 3 of 32-byte rows
    p.write_bytes(bytes(raw))
    full = verify(ds.root)
    assert _has(full, "features.bin", "sha256")[0] and _has(full, "features.bin", "first: row 3")[0], full
    quick = verify(ds.root, quick=True)  # no sha256 of features.bin, but every row's xxh3
    assert _has(quick, "features.bin", "first: row 3")[0], quick
    assert not _has(quick, "features.bin", "sha256")[0]


def test_a_flipped_padding_byte_is_found_by_the_full_check_only(random_dataset):
    d = random_dataset(num_nodes=300, dim=100)  # 400-byte rows padded to a 512-byte stride
    p = d.root / "features.bin"
    raw = bytearray(p.read_bytes())
    raw[512 * 7 + 450] ^= 0x01  # padding of row 7: no value, no checksum covers it
    p.write_bytes(bytes(raw))
    assert _has(verify(d.root), "features.bin", "padding")[0]
    assert verify(d.root, quick=True) == []


def test_truncated_features(ds):
    p = ds.root / "features.bin"
    with open(p, "r+b") as f:
        f.truncate(p.stat().st_size - 4096)
    for quick in (False, True):
        ok, msgs = _has(verify(ds.root, quick=quick), "features.bin", "size: expected")
        assert ok, msgs


def test_non_finite_features(ds):
    lay = ds.features()
    raw = np.memmap(lay.path, dtype=np.float32, mode="r+")
    raw[17 * lay.row_stride // 4 + 3] = np.nan
    raw.flush()
    del raw
    ok, msgs = _has(verify(ds.root), "features.bin", "1 non-finite values (first in row 17)")
    assert ok, msgs


def test_non_monotone_indptr(ds):
    p = ds.root / f"{ET}/csr_indptr.npy"
    ip = np.load(p)
    ip[10], ip[11] = ip[11] + 1, ip[10]
    _resave(p, ip)
    problems = verify(ds.root)
    ok, msgs = _has(problems, f"{ET}/csr_indptr.npy", "not monotone")
    assert ok, msgs
    ok, msgs = _has(problems, f"{ET}/csr_indptr.npy", "sha256")
    assert ok, msgs


def test_indices_out_of_range(ds):
    p = ds.root / f"{ET}/csc_indices.npy"
    ix = np.load(p)
    ix[5] = 600
    _resave(p, ix)
    ok, msgs = _has(verify(ds.root), f"{ET}/csc_indices.npy", "id out of range: entry 5 is 600, expected [0, 600)")
    assert ok, msgs


def test_csc_and_csr_disagree(ds):
    p = ds.root / f"{ET}/csr_indices.npy"
    ix = np.load(p)
    ix[0] = (ix[0] + 1) % 600  # still in range, but now a different edge set
    _resave(p, ix)
    ok, msgs = _has(verify(ds.root), f"{ET}/csr_indices.npy", "disagrees with the other orientation")
    assert ok, msgs


def test_wrong_dtype(ds):
    p = ds.root / f"{ET}/csc_indices.npy"
    _resave(p, np.load(p).astype(np.int32))
    problems = verify(ds.root)
    ok, msgs = _has(problems, f"{ET}/csc_indices.npy", "dtype: expected int64, found int32")
    assert ok, msgs
    ok, msgs = _has(problems, f"{ET}/csc_indices.npy", "size: expected")
    assert ok, msgs


def test_label_out_of_range(ds):
    p = ds.root / "labels/paper.npy"
    y = np.load(p)
    y[3] = 19
    _resave(p, y)
    ok, msgs = _has(verify(ds.root), "labels/paper.npy", "label out of range: node 3 has 19, expected -1 or [0, 19)")
    assert ok, msgs


def test_bad_splits(ds):
    tr = np.load(ds.root / "splits/train.npy")
    va = np.load(ds.root / "splits/val.npy")
    va[0] = tr[0]  # overlap
    _resave(ds.root / "splits/val.npy", va)
    te = np.load(ds.root / "splits/test.npy")
    te[-1] = 10_000
    _resave(ds.root / "splits/test.npy", te)
    problems = verify(ds.root)
    assert _has(problems, "splits/val.npy", "ids also appear in an earlier split")[0]
    assert _has(problems, "splits/test.npy", "id out of range")[0]
    assert "splits/train.npy" not in _files(problems)


def test_missing_and_extra_files(ds):
    (ds.root / "static/paper.degree.npy").unlink()
    (ds.root / "stray.tmp").write_text("x")
    problems = verify(ds.root)
    assert _has(problems, "static/paper.degree.npy", "missing")[0]
    assert _has(problems, "stray.tmp", "not listed in metadata.json")[0]


def test_static_wrong_length(ds):
    _resave(ds.root / "static/paper.pagerank_u8.npy", np.zeros(599, np.uint8))
    ok, msgs = _has(verify(ds.root), "static/paper.pagerank_u8.npy", "shape: expected (600,), found (599,)")
    assert ok, msgs


def test_bad_feature_layout_in_metadata(ds):
    meta = json.loads((ds.root / "metadata.json").read_text())
    meta["features"]["row_stride"] = 48
    (ds.root / "metadata.json").write_text(json.dumps(meta))
    ok, msgs = _has(verify(ds.root), "metadata.json", "features.row_stride: expected 32, found 48")
    assert ok, msgs


@pytest.mark.parametrize("content, text", [
    (None, "missing; not an lsm-gnn dataset directory"),
    ("{not json", "not valid JSON"),
    ('{"format": "other", "format_version": 1}', "format: expected 'lsm-gnn-dataset', found 'other'"),
    ('[1, 2]', "expected a JSON object"),
])
def test_bad_metadata(ds, content, text):
    p = ds.root / "metadata.json"
    if content is None:
        p.unlink()
    else:
        p.write_text(content)
    problems = verify(ds.root)
    assert problems and all(q.file == "metadata.json" for q in problems)
    assert any(text in q.message for q in problems), [str(q) for q in problems]


def test_missing_directory(tmp_path):
    problems = verify(tmp_path / "nope")
    assert len(problems) == 1 and "does not exist" in problems[0].message


def test_problem_str():
    assert str(Problem("labels/paper.npy", "bad")) == "labels/paper.npy: bad"


def test_per_owner_files_beside_the_dataset_are_not_leftovers(ds):
    (ds.root / "owners-2").mkdir()
    (ds.root / "owners-2" / "owner-0.bin").write_bytes(b"\0" * 4096)
    assert verify(ds.root, quick=True) == []
    (ds.root / "stray.bin").write_bytes(b"x")
    assert [p.file for p in verify(ds.root, quick=True)] == ["stray.bin"]
