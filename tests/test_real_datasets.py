"""Real-dataset download and preparation, on tiny files in the exact real layouts served from a
loopback HTTP server (tests/realdata_fixtures.py). Nothing is downloaded from the internet."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

import realdata_fixtures as fx
from lsm_gnn.datasets import pagerank
from lsm_gnn.datasets.format import Dataset, DatasetWriter
from lsm_gnn.datasets.real import archives, catalog, convert, download, http, prepare
from lsm_gnn.datasets.real.npy import EdgeArray, inspect, open_array
from lsm_gnn.utils.errors import DataError, DownloadError, InputError


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch):
    """Chunk sizes far below the data sizes, so every chunked path runs over many chunks."""
    monkeypatch.setattr(http, "BACKOFF_S", 0.0)
    monkeypatch.setattr(http, "TIMEOUT_S", 10.0)
    monkeypatch.setattr(http, "CHUNK_BYTES", 4096)
    monkeypatch.setattr(convert, "EDGE_CHUNK", 257)
    monkeypatch.setattr(convert, "LABEL_CHUNK", 100)
    monkeypatch.setattr(convert, "FEATURE_CHUNK_BYTES", 4096 * 37)


@pytest.fixture
def server():
    s = fx.FileServer()
    yield s
    s.close()


def _reference_compressed(major, minor, n):
    order = np.lexsort((minor, major))
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(major, minlength=n), out=indptr[1:])
    return indptr, minor[order]


def _sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ---- HTTP ----------------------------------------------------------------------------------------
DATA = np.random.default_rng(5).integers(0, 256, 50_000, dtype=np.uint8).tobytes()


def test_fetch_downloads_and_checks_md5(server, tmp_path):
    url = server.add("/f.bin", DATA)
    out = http.fetch(url, tmp_path / "f.bin", md5=fx.md5_of(DATA), size=len(DATA), progress=False)
    assert out.read_bytes() == DATA
    assert not (tmp_path / "f.bin.part").exists()
    http.fetch(url, tmp_path / "f.bin", md5=fx.md5_of(DATA), progress=False)   # already there
    assert len(server.log) == 1


def test_fetch_resumes_after_dropped_connection(server, tmp_path):
    url = server.add("/f.bin", DATA)
    server.drops["/f.bin"] = (2, 7000)        # two responses die after 7000 bytes each
    out = http.fetch(url, tmp_path / "f.bin", md5=fx.md5_of(DATA), progress=False)
    assert out.read_bytes() == DATA
    assert [(r, s) for _, r, s in server.log] == [(None, 200), ("bytes=7000-", 206), ("bytes=14000-", 206)]


def test_fetch_resumes_a_part_file_left_by_an_earlier_run(server, tmp_path):
    url = server.add("/f.bin", DATA)
    (tmp_path / "f.bin.part").write_bytes(DATA[:12345])
    out = http.fetch(url, tmp_path / "f.bin", md5=fx.md5_of(DATA), progress=False)
    assert out.read_bytes() == DATA
    assert server.log == [("/f.bin", "bytes=12345-", 206)]


def test_fetch_complete_part_file_gets_416_and_finishes(server, tmp_path):
    url = server.add("/f.bin", DATA)
    (tmp_path / "f.bin.part").write_bytes(DATA)
    assert http.fetch(url, tmp_path / "f.bin", md5=fx.md5_of(DATA), progress=False).read_bytes() == DATA
    assert server.log[0][2] == 416


def test_fetch_restarts_when_server_ignores_range(server, tmp_path):
    url = server.add("/f.bin", DATA)
    server.ignore_range = True
    (tmp_path / "f.bin.part").write_bytes(b"\xff" * 9000)   # wrong bytes: must not survive
    out = http.fetch(url, tmp_path / "f.bin", md5=fx.md5_of(DATA), progress=False)
    assert out.read_bytes() == DATA
    assert server.log == [("/f.bin", "bytes=9000-", 200)]


def test_fetch_drop_with_server_ignoring_range_still_correct(server, tmp_path):
    url = server.add("/f.bin", DATA)
    server.ignore_range = True
    server.drops["/f.bin"] = (1, 20000)
    out = http.fetch(url, tmp_path / "f.bin", md5=fx.md5_of(DATA), progress=False)
    assert out.read_bytes() == DATA


def test_fetch_wrong_md5_deletes_part(server, tmp_path):
    url = server.add("/f.bin", DATA)
    with pytest.raises(DownloadError, match="MD5 mismatch"):
        http.fetch(url, tmp_path / "f.bin", md5="0" * 32, progress=False)
    assert not (tmp_path / "f.bin").exists() and not (tmp_path / "f.bin.part").exists()


def test_fetch_truncated_remote_file_fails_size_check(server, tmp_path):
    url = server.add("/f.bin", DATA[:-100])
    with pytest.raises(DownloadError, match=f"offers {len(DATA) - 100} bytes, expected {len(DATA)}"):
        http.fetch(url, tmp_path / "f.bin", size=len(DATA), progress=False)
    assert not (tmp_path / "f.bin").exists()


def test_fetch_http_error_and_giving_up(server, tmp_path, monkeypatch):
    with pytest.raises(DownloadError, match="HTTP 404"):
        http.fetch(server.base + "/missing", tmp_path / "m", progress=False)
    monkeypatch.setattr(http, "RETRIES", 2)
    url = server.add("/f.bin", DATA)
    server.drops["/f.bin"] = (100, 0)          # every response dies before its first byte
    with pytest.raises(DownloadError, match="giving up after 2 retries"):
        http.fetch(url, tmp_path / "f.bin", progress=False)
    assert len(server.log) == 1 + 3
    assert not (tmp_path / "f.bin").exists()


# ---- layout-tolerant arrays -------------------------------------------------------------------
def test_headerless_npy_is_read_as_raw_rows(tmp_path):
    a = np.random.default_rng(0).standard_normal((7, 1024)).astype(np.float32)
    a.tofile(tmp_path / "node_feat.npy")
    info = inspect(tmp_path / "node_feat.npy", dtype=np.float32, row_shape=(1024,))
    assert info.headerless and info.shape == (7, 1024)
    np.testing.assert_array_equal(open_array(tmp_path / "node_feat.npy", dtype="float32", row_shape=(1024,)), a)
    with pytest.raises(DataError, match="no .npy header"):
        open_array(tmp_path / "node_feat.npy")
    with open(tmp_path / "node_feat.npy", "ab") as f:
        f.write(b"\0" * 12)
    with pytest.raises(DataError, match="not a whole number of rows"):
        open_array(tmp_path / "node_feat.npy", dtype="float32", row_shape=(1024,))


def test_npy_header_checks(tmp_path):
    a = np.arange(40, dtype=np.int64).reshape(20, 2)
    np.save(tmp_path / "e.npy", a)
    np.testing.assert_array_equal(open_array(tmp_path / "e.npy"), a)
    data = (tmp_path / "e.npy").read_bytes()
    (tmp_path / "t.npy").write_bytes(data[:-8])
    with pytest.raises(DataError, match="truncated") as e:
        open_array(tmp_path / "t.npy")
    assert "t.npy" in str(e.value)
    np.save(tmp_path / "f.npy", np.asfortranarray(np.arange(12.0).reshape(3, 4)))
    np.testing.assert_array_equal(open_array(tmp_path / "f.npy"), np.arange(12.0).reshape(3, 4))
    np.save(tmp_path / "map.npy", {1: 2}, allow_pickle=True)
    with pytest.raises(DataError, match="pickled Python objects"):
        open_array(tmp_path / "map.npy")


def test_edge_layouts(tmp_path):
    e = np.array([[0, 1], [1, 2], [2, 0]], dtype=np.int64)
    np.save(tmp_path / "e2.npy", e)
    np.save(tmp_path / "2e.npy", e.T.copy())
    for name in ("e2.npy", "2e.npy"):
        for declared in ("E2", "2E"):
            ea = EdgeArray(tmp_path / name, declared)
            src, dst = ea.chunk(0, ea.num_edges)
            np.testing.assert_array_equal(src, e[:, 0])
            np.testing.assert_array_equal(dst, e[:, 1])
    np.save(tmp_path / "bad.npy", np.zeros((4, 3), np.int64))
    with pytest.raises(DataError, match=r"\(E, 2\) or \(2, E\)"):
        EdgeArray(tmp_path / "bad.npy", "E2")
    np.save(tmp_path / "float.npy", np.zeros((4, 2), np.float32))
    with pytest.raises(DataError, match="integers"):
        EdgeArray(tmp_path / "float.npy", "E2")


# ---- chunked conversions ----------------------------------------------------------------------
def test_chunked_compressed_matches_dataset_writer(tmp_path):
    rng = np.random.default_rng(3)
    n = 500
    src = rng.integers(0, n // 2, 3000)      # nodes >= n/2 have no out-edges; duplicates and loops kept
    dst = rng.integers(0, n, 3000)
    np.save(tmp_path / "e.npy", np.stack([src, dst], axis=1))
    ea = EdgeArray(tmp_path / "e.npy", "E2")
    with DatasetWriter(tmp_path / "ref", "ref") as w:
        w.add_node_type("paper", n)
        et = w.add_edges("paper", "cites", "paper", src, dst)
        for kind, by in (("csc", "dst"), ("csr", "src")):
            convert.build_compressed(convert.edge_chunks(ea, (0, n), (0, n), by=by), n, n,
                                     tmp_path / f"{kind}_indptr.npy", tmp_path / f"{kind}_indices.npy")
            for part in ("indptr", "indices"):
                np.testing.assert_array_equal(np.load(tmp_path / f"{kind}_{part}.npy"),
                                              np.load(w.tmp / f"topology/{et}/{kind}_{part}.npy"))


@pytest.mark.parametrize("dim,dtype", [(100, "float32"), (768, "float16"), (1024, "float32"), (3, "float32")])
def test_feature_file_is_byte_identical_to_feature_file_writer(tmp_path, dim, dtype):
    rows = np.random.default_rng(0).standard_normal((301, dim)).astype(dtype)
    with DatasetWriter(tmp_path / "ref", "ref") as w:
        w.add_node_type("paper", len(rows))
        with w.feature_file(dim, dtype) as f:
            f.write(rows[:150])
            f.write(rows[150:])
        ref = (w.tmp / "features.bin").read_bytes()
        ref_meta = dict(w.meta["features"])
    ff = convert.FeatureFile(tmp_path / "features.bin", dim, dtype, len(rows))
    convert.copy_rows(ff, [(rows, [])])
    meta = ff.close()
    assert (tmp_path / "features.bin").read_bytes() == ref
    assert meta["sha256"] == hashlib.sha256(ref).hexdigest()
    assert {k: meta[k] for k in ref_meta if k in meta} == {k: ref_meta[k] for k in ref_meta if k in meta}


# ---- IGB / IGBH ---------------------------------------------------------------------------------
def _check_topology(ds: Dataset, etype: str, edges: np.ndarray, n_src: int, n_dst: int):
    src, dst = edges[:, 0], edges[:, 1]
    assert ds.num_edges(etype) == len(edges)
    for (indptr, indices), (major, minor, n) in ((ds.csc(etype), (dst, src, n_dst)), (ds.csr(etype), (src, dst, n_src))):
        ref_ptr, ref_idx = _reference_compressed(major, minor, n)
        np.testing.assert_array_equal(indptr, ref_ptr)
        np.testing.assert_array_equal(indices, ref_idx)


def test_igb_tiny_tarball_download_and_prepare(server, tmp_path, monkeypatch):
    src = tmp_path / "src"
    arrays = fx.write_igb(src, "tiny")
    tar = fx.tar_gz(src, "tiny")
    monkeypatch.setitem(catalog.IGB_TARBALL_MD5, ("igb", "tiny"), fx.md5_of(tar))
    server.add("/igb-homogeneous/igb_homogeneous_tiny.tar.gz", tar)
    server.drops["/igb-homogeneous/igb_homogeneous_tiny.tar.gz"] = (1, len(tar) // 3)
    raw = download("igb", "tiny", tmp_path / "raw", base_url=server.base + "/igb-homogeneous/", progress=False)
    assert raw == tmp_path / "raw" / "tiny"
    assert (raw / "processed/paper/node_feat.npy").is_file()
    assert not (tmp_path / "raw" / "igb_homogeneous_tiny.tar.gz").exists()   # deleted after extraction
    assert json.loads((raw / ".lsm-gnn-download.json").read_text())["name"] == "igb"
    assert download("igb", "tiny", tmp_path / "raw", base_url=server.base + "/igb-homogeneous") == raw
    assert len(server.log) == 2                                             # nothing fetched again
    with pytest.raises(InputError, match="already holds igb"):
        download("igbh", "tiny", tmp_path / "raw", base_url=server.base, progress=False)

    ds = prepare("igb", raw, tmp_path / "out", progress=False)
    assert ds.node_types == ["paper"] and ds.num_nodes() == 300
    _check_topology(ds, "paper__cites__paper", arrays["edges"][("paper", "cites", "paper")], 300, 300)
    np.testing.assert_array_equal(ds.feature_array(), arrays["feat"]["paper"])
    np.testing.assert_array_equal(ds.labels(), arrays["label_19"].astype(np.int64))
    assert ds.num_classes == 19 and ds.meta["source"]["size"] == "tiny"
    parts = [ds.split(k) for k in ("train", "val", "test")]
    assert [len(p) for p in parts] == [180, 60, 60]
    np.testing.assert_array_equal(np.sort(np.concatenate(parts)), np.arange(300))
    ref = pagerank.dataset_static_scores(ds)["paper"]
    np.testing.assert_array_equal(ds.pagerank_u8(), ref[0])
    np.testing.assert_array_equal(ds.degree(), ref[1])
    assert ds.meta["files"]["features.bin"]["sha256"] == _sha256(ds.features().path)
    assert not (tmp_path / "out.prepare-state").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out")] == []


def test_igbh_tiny_all_six_types(server, tmp_path, monkeypatch):
    src = tmp_path / "src"
    arrays = fx.write_igb(src, "tiny", hetero=True)
    tar = fx.tar_gz(src, "tiny")
    monkeypatch.setitem(catalog.IGB_TARBALL_MD5, ("igbh", "tiny"), fx.md5_of(tar))
    server.add("/igb_heterogeneous_tiny.tar.gz", tar)
    raw = download("igbh", "tiny", tmp_path / "raw", base_url=server.base, progress=False)
    ds = prepare("igbh", raw, tmp_path / "out", progress=False)
    c = fx.IGBH_TINY
    assert {t: ds.num_nodes(t) for t in ds.node_types} == c
    order = ["paper", "author", "fos", "institute", "journal", "conference"]
    lay = ds.features()
    assert list(lay.type_offsets) == order
    feats = ds.feature_array()
    for t in order:
        off = lay.type_offsets[t]
        np.testing.assert_array_equal(feats[off: off + c[t]], arrays["feat"][t])
    for (s, r, d), e in arrays["edges"].items():
        _check_topology(ds, f"{s}__{r}__{d}", e, c[s], c[d])
        if s != d:   # the reverse relation is stored too: its CSC is the forward CSR
            _check_topology(ds, f"{d}__rev_{r}__{s}", e[:, ::-1], c[d], c[s])
    assert len(ds.edge_types) == 11
    ref = pagerank.dataset_static_scores(ds)
    for t in order:
        np.testing.assert_array_equal(ds.degree(t), ref[t][1])
        assert np.abs(ds.pagerank_u8(t).astype(int) - ref[t][0].astype(int)).max() <= 1
    assert len(ds.static_scores()) == sum(c.values())


def _serve_tree(server, root, prefix):
    for path, data in fx.files_under(root, prefix).items():
        server.add(path, data)


def test_igb_large_style_headerless_files(server, tmp_path, monkeypatch):
    counts = {"paper": 260, "author": 310, "institute": 11, "fos": 33, "journal": 7, "conference": 3}
    monkeypatch.setitem(catalog.IGB_NODE_COUNTS, "large", counts)
    src = tmp_path / "src"
    arrays = fx.write_igb(src, "large", hetero=True, raw=True, counts=counts)
    _serve_tree(server, src / "large" / "processed", "/mirror/igb_large/processed")
    server.drops["/mirror/igb_large/processed/paper/node_feat.npy"] = (1, 300_000)
    raw = download("igbh", "large", tmp_path / "raw", base_url=server.base + "/mirror/igb_large/processed",
                   progress=False)
    paper = raw / "processed/paper/node_feat.npy"
    assert paper.read_bytes()[:6] != b"\x93NUMPY"       # still headerless, as on the server
    assert not any("id_index_mapping" in p for p, _, _ in server.log)   # pickled id maps are skipped
    ds = prepare("igbh", raw, tmp_path / "out", progress=False)
    assert ds.meta["source"]["headerless_files"] == [
        "paper/node_feat.npy", "author/node_feat.npy", "paper/node_label_19.npy"]
    np.testing.assert_array_equal(ds.feature_array()[:260], arrays["feat"]["paper"])
    np.testing.assert_array_equal(ds.labels(), arrays["label_19"].astype(np.int64))
    _check_topology(ds, "paper__cites__paper", arrays["edges"][("paper", "cites", "paper")], 260, 260)


def test_igb_large_download_rejects_short_headerless_file(server, tmp_path, monkeypatch):
    monkeypatch.setitem(catalog.IGB_NODE_COUNTS, "large", {"paper": 50})
    src = tmp_path / "src"
    fx.write_igb(src, "large", raw=True, counts={"paper": 49})     # one row short
    _serve_tree(server, src / "large" / "processed", "")
    with pytest.raises(DownloadError, match=f"offers {49 * 4096} bytes, expected {50 * 4096}"):
        download("igb", "large", tmp_path / "raw", base_url=server.base, progress=False)


def test_igb_download_rejects_truncated_npy(server, tmp_path, monkeypatch):
    monkeypatch.setitem(catalog.IGB_NODE_COUNTS, "large", {"paper": 50})
    src = tmp_path / "src"
    fx.write_igb(src, "large", raw=True, counts={"paper": 50})
    files = fx.files_under(src / "large" / "processed", "")
    files["/paper__cites__paper/edge_index.npy"] = files["/paper__cites__paper/edge_index.npy"][:-16]
    server.files.update(files)
    with pytest.raises(DownloadError, match="truncated"):
        download("igb", "large", tmp_path / "raw", base_url=server.base, progress=False)
    assert (tmp_path / "raw/large/processed/paper__cites__paper/edge_index.npy.bad").is_file()


def test_igb_full_short_labels_labeled_prefix_and_tail_patch(tmp_path, monkeypatch):
    counts = {"paper": 240}
    monkeypatch.setitem(catalog.IGB_FULL_LABELED, "19", 200)
    arrays = fx.write_igb(tmp_path / "raw", "full", raw=True, counts=counts, label_rows=220)
    tail = np.full((10, 1024), 7.0, dtype=np.float32)
    tail.tofile(tmp_path / "raw/full/processed/paper/node_feat_5M_tail.npy")
    ds = prepare("igb", tmp_path / "raw" / "full", tmp_path / "out", progress=False)
    lab = ds.labels()
    np.testing.assert_array_equal(lab[:200], arrays["label_19"][:200].astype(np.int64))
    assert (lab[200:] == -1).all()
    np.testing.assert_array_equal(ds.split("train"), np.arange(120))
    np.testing.assert_array_equal(ds.split("val"), np.arange(120, 160))
    np.testing.assert_array_equal(ds.split("test"), np.arange(160, 200))
    feats = ds.feature_array()
    np.testing.assert_array_equal(feats[:230], arrays["feat"]["paper"][:230])
    assert (feats[230:] == 7.0).all()


# ---- ogbn-papers100M ----------------------------------------------------------------------------
def test_papers100m_zip_download_and_prepare(server, tmp_path):
    z, a = fx.papers100m_zip()
    server.add("/nodeproppred/papers100M-bin.zip", z)
    server.drops["/nodeproppred/papers100M-bin.zip"] = (1, len(z) // 2)
    raw = download("ogbn-papers100M", None, tmp_path / "raw", base_url=server.base + "/nodeproppred",
                   progress=False)
    assert (raw / "raw" / "data.npz").is_file() and (raw / "RELEASE_v1.txt").is_file()
    ds = prepare("ogbn-papers100M", tmp_path / "raw", tmp_path / "out", progress=False)
    n = a["feat"].shape[0]
    lay = ds.features()
    assert (lay.dim, lay.dtype, lay.row_stride) == (128, np.float32, 512)
    np.testing.assert_array_equal(ds.feature_array(), a["feat"])
    ei = a["edge_index"]
    _check_topology(ds, "paper__cites__paper", ei.T, n, n)
    lab = a["label"][:, 0]
    want = np.where(np.isnan(lab), -1, np.nan_to_num(lab)).astype(np.int64)
    np.testing.assert_array_equal(ds.labels(), want)
    assert ds.num_classes == 172 and ds.meta["labels"]["num_labeled"] == n // 4
    for k, ids in zip(("train", "val", "test"), a["splits"]):
        np.testing.assert_array_equal(ds.split(k), ids)
    assert ds.meta["source"]["release"].startswith("ogbn-papers100M")


def _papers_tree(tmp_path, **edit):
    """An extracted papers100M directory whose data.npz members are replaced by `edit`."""
    z, a = fx.papers100m_zip()
    archives_dir = tmp_path / "raw"
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "p.zip").write_bytes(z)
    archives.extract(tmp_path / "p.zip", archives_dir, "zip", progress=False)
    root = archives_dir / "papers100M-bin"
    if edit:
        with np.load(root / "raw/data.npz") as d:
            members = {k: d[k] for k in d.files}
        members.update(edit)
        members = {k: v for k, v in members.items() if v is not None}
        np.savez_compressed(root / "raw/data.npz", **members)
    return root, a


def test_papers100m_bad_inputs(tmp_path):
    root, a = _papers_tree(tmp_path / "a", num_edges_list=np.array([5]))
    with pytest.raises(DataError, match="num_edges_list"):
        prepare("ogbn-papers100M", root, tmp_path / "o1", progress=False)
    root, a = _papers_tree(tmp_path / "b", node_feat=None)
    with pytest.raises(DataError, match="member node_feat.npy missing") as e:
        prepare("ogbn-papers100M", root, tmp_path / "o2", progress=False)
    assert "data.npz" in str(e.value)
    root, a = _papers_tree(tmp_path / "c")
    import gzip
    (root / "split/time/valid.csv.gz").write_bytes(gzip.compress(b"3\n999999\n"))
    with pytest.raises(DataError, match="split id out of range") as e:
        prepare("ogbn-papers100M", root, tmp_path / "o3", progress=False)
    assert "valid.csv.gz" in str(e.value)
    assert not (tmp_path / "o3").exists()


# ---- MAG240M ------------------------------------------------------------------------------------
def test_mag240m_zip_download_and_prepare(server, tmp_path, monkeypatch):
    z, a = fx.mag240m_zip()
    monkeypatch.setattr(catalog, "MAG240M_MD5", fx.md5_of(z))
    server.add("/lsc/mag240m_kddcup2021.zip", z)
    raw = download("mag240m", None, tmp_path / "raw", base_url=server.base + "/lsc", progress=False)
    ds = prepare("mag240m", raw, tmp_path / "out", progress=False)
    m = a["meta"]
    assert {t: ds.num_nodes(t) for t in ds.node_types} == {"paper": m["paper"], "author": m["author"],
                                                          "institution": m["institution"]}
    lay = ds.features()
    assert lay.type_offsets == {"paper": 0} and lay.dtype == np.float16 and lay.row_stride == 1536
    np.testing.assert_array_equal(ds.feature_array(), a["feat"])
    lab = a["label"]
    np.testing.assert_array_equal(ds.labels(), np.where(np.isnan(lab) | (lab < 0), -1, np.nan_to_num(lab)).astype(np.int64))
    assert ds.num_classes == 153
    s = a["split"]
    np.testing.assert_array_equal(ds.split("train"), s["train"])
    np.testing.assert_array_equal(ds.split("val"), s["valid"])
    np.testing.assert_array_equal(ds.split("test"), np.sort(np.concatenate([s["test-dev"], s["test-challenge"]])))
    c = {"paper": m["paper"], "author": m["author"], "institution": m["institution"]}
    for k, e in a["edges"].items():
        sname, r, dname = k.split("___")
        _check_topology(ds, f"{sname}__{r}__{dname}", e.T, c[sname], c[dname])
    assert "paper__rev_writes__author" in ds.edge_types and len(ds.edge_types) == 5


def test_mag240m_wrong_checksum(server, tmp_path, monkeypatch):
    z, _ = fx.mag240m_zip()
    monkeypatch.setattr(catalog, "MAG240M_MD5", "f" * 32)
    server.add("/mag240m_kddcup2021.zip", z)
    with pytest.raises(DownloadError, match="MD5 mismatch"):
        download("mag240m", None, tmp_path / "raw", base_url=server.base, progress=False)
    assert list((tmp_path / "raw").iterdir()) == []


# ---- resume and bad inputs ----------------------------------------------------------------------
def test_prepare_resumes_after_interruption(tmp_path, monkeypatch):
    fx.write_igb(tmp_path / "raw", "tiny", hetero=True)
    clean = prepare("igbh", tmp_path / "raw", tmp_path / "clean", progress=False)

    calls = {"write": 0, "compressed": 0}
    real_write = convert.FeatureFile.write

    def dying_write(self, rows):
        calls["write"] += 1
        if calls["write"] == 5:
            raise KeyboardInterrupt
        return real_write(self, rows)

    monkeypatch.setattr(convert.FeatureFile, "write", dying_write)
    with pytest.raises(KeyboardInterrupt):
        prepare("igbh", tmp_path / "raw", tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists()
    state = json.loads((tmp_path / "out.prepare-state/state.json").read_text())
    assert {"labels", "splits", "static", "topology/paper__cites__paper"} <= set(state["done"])
    assert "features" not in state["done"]
    assert json.loads((tmp_path / "out.prepare-state/features.bin.rows.json").read_text())["rows"] > 0

    monkeypatch.setattr(convert.FeatureFile, "write", real_write)
    real_build = convert.build_compressed

    def counting_build(*a, **k):
        calls["compressed"] += 1
        return real_build(*a, **k)

    monkeypatch.setattr(convert, "build_compressed", counting_build)
    ds = prepare("igbh", tmp_path / "raw", tmp_path / "out", progress=False)
    assert calls["compressed"] == 0                       # finished steps were not redone
    assert ds.meta["files"] == clean.meta["files"]        # same bytes as an uninterrupted run
    assert not (tmp_path / "out.prepare-state").exists()


def test_prepare_restarts_when_inputs_change(tmp_path, monkeypatch):
    fx.write_igb(tmp_path / "raw", "tiny")
    monkeypatch.setattr(convert.FeatureFile, "write", lambda self, rows: (_ for _ in ()).throw(KeyboardInterrupt))
    with pytest.raises(KeyboardInterrupt):
        prepare("igb", tmp_path / "raw", tmp_path / "out", progress=False)
    monkeypatch.undo()
    arrays = fx.write_igb(tmp_path / "raw", "tiny", seed=9)        # different raw files now
    ds = prepare("igb", tmp_path / "raw", tmp_path / "out", progress=False)
    _check_topology(ds, "paper__cites__paper", arrays["edges"][("paper", "cites", "paper")], 300, 300)


def _igb_raw(tmp_path, **kw):
    return fx.write_igb(tmp_path / "raw", "tiny", **kw), tmp_path / "raw" / "tiny" / "processed"


def test_prepare_bad_igb_inputs(tmp_path):
    _, proc = _igb_raw(tmp_path)
    e = np.load(proc / "paper__cites__paper/edge_index.npy")
    e[17, 1] = 300
    np.save(proc / "paper__cites__paper/edge_index.npy", e)
    with pytest.raises(DataError, match=r"edge 17: destination id out of range \(expected \[0, 300\), found 300\)") as err:
        prepare("igb", tmp_path / "raw", tmp_path / "out", progress=False)
    assert "edge_index.npy" in str(err.value)
    np.save(proc / "paper__cites__paper/edge_index.npy", e[:, :1].repeat(3, axis=1))
    with pytest.raises(DataError, match=r"\(E, 2\) or \(2, E\)"):
        prepare("igb", tmp_path / "raw", tmp_path / "out", progress=False)
    (proc / "paper__cites__paper/edge_index.npy").unlink()
    with pytest.raises(DataError, match="missing edge file"):
        prepare("igb", tmp_path / "raw", tmp_path / "out", progress=False)


@pytest.mark.parametrize("labels,match", [
    (np.full(300, 19.0, np.float32), "class id out of range"),
    (np.full(300, 2.5, np.float32), "not a whole number"),
    (np.zeros(301, np.float32), "more rows than nodes"),
])
def test_prepare_bad_labels(tmp_path, labels, match):
    _, proc = _igb_raw(tmp_path)
    np.save(proc / "paper/node_label_19.npy", labels)
    with pytest.raises(DataError, match=match) as e:
        prepare("igb", tmp_path / "raw", tmp_path / "out", progress=False)
    assert "node_label_19.npy" in str(e.value)


def test_prepare_bad_igbh_inputs(tmp_path):
    _, proc = _igb_raw(tmp_path, hetero=True)
    np.save(proc / "fos/node_feat.npy", np.zeros((40, 512), np.float32))
    with pytest.raises(DataError, match="share dim and dtype") as e:
        prepare("igbh", tmp_path / "raw", tmp_path / "out", progress=False)
    assert "fos/node_feat.npy" in str(e.value)
    (proc / "author/node_feat.npy").unlink()
    with pytest.raises(DataError, match="author/node_feat.npy: missing"):
        prepare("igbh", tmp_path / "raw", tmp_path / "out", progress=False)


def test_prepare_argument_errors(tmp_path):
    _igb_raw(tmp_path)
    with pytest.raises(InputError, match="unknown dataset"):
        prepare("cora", tmp_path / "raw", tmp_path / "out")
    with pytest.raises(InputError, match="size must be one of"):
        download("igb", "huge", tmp_path / "d")
    with pytest.raises(InputError, match="single size"):
        download("mag240m", "tiny", tmp_path / "d")
    with pytest.raises(DataError, match="does not exist"):
        prepare("igb", tmp_path / "nowhere", tmp_path / "out")
    with pytest.raises(DataError, match="no IGB data found"):
        prepare("igb", tmp_path, tmp_path / "out")
    prepare("igb", tmp_path / "raw", tmp_path / "out", progress=False)
    with pytest.raises(InputError, match="already exists"):
        prepare("igb", tmp_path / "raw", tmp_path / "out", progress=False)
    assert prepare("igb", tmp_path / "raw", tmp_path / "out", progress=False, overwrite=True).num_nodes() == 300


def test_corrupt_archives(tmp_path):
    z, _ = fx.papers100m_zip()
    (tmp_path / "p.zip").write_bytes(z[: len(z) // 2])
    with pytest.raises(DataError, match="corrupt or truncated zip"):
        archives.extract(tmp_path / "p.zip", tmp_path / "x", "zip", progress=False)
    src = tmp_path / "src"
    fx.write_igb(src, "tiny")
    tar = fx.tar_gz(src, "tiny")
    (tmp_path / "t.tar.gz").write_bytes(tar[: len(tar) // 2])
    with pytest.raises(DataError, match="corrupt or truncated tar.gz"):
        archives.extract(tmp_path / "t.tar.gz", tmp_path / "y", "tar.gz", progress=False)
