"""`lsm-gnn dataset import`: users' own graphs (.npy, .csv, .tsv, DGL) into the lsm-gnn format, the
writer's checks on what it accepts, and the metadata checks when a dataset is opened."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from lsm_gnn.cli import cli
from lsm_gnn.datasets.format import Dataset, DatasetWriter
from lsm_gnn.datasets.importer import import_graph
from lsm_gnn.datasets.verify import verify
from lsm_gnn.utils.errors import DataError, InputError

N = 240
ET = "node__edge__node"


@pytest.fixture(scope="module")
def graph():
    """A small random graph: (E, 2) int64 edges, every node with an edge, plus labels and features."""
    rng = np.random.default_rng(7)
    src = np.concatenate([np.arange(N), rng.integers(0, N, 900)])
    dst = np.concatenate([rng.integers(0, N, N), rng.integers(0, N, 900)])
    labels = rng.integers(0, 4, N)
    labels[rng.choice(N, 30, replace=False)] = -1
    feats = rng.standard_normal((N, 8)).astype(np.float32)
    return np.stack([src, dst], axis=1), labels, feats


@pytest.fixture(scope="module")
def files(graph, tmp_path_factory):
    d = tmp_path_factory.mktemp("inputs")
    edges, labels, feats = graph
    np.save(d / "e2.npy", edges)
    np.save(d / "2e.npy", np.ascontiguousarray(edges.T))
    (d / "edges.csv").write_text("src,dst\n" + "".join(f"{a},{b}\n" for a, b in edges))
    (d / "plain.csv").write_text("".join(f"{a},{b}\n" for a, b in edges))
    (d / "edges.tsv").write_text("".join(f"{a}\t{b}\n" for a, b in edges))
    np.save(d / "labels.npy", labels)
    np.save(d / "feats.npy", feats)
    feats.astype(np.float16).tofile(d / "feats.raw")
    labelled = np.flatnonzero(labels >= 0)
    np.save(d / "train.npy", labelled[:100])
    np.save(d / "val.npy", labelled[100:150])
    np.save(d / "test.npy", labelled[150:])
    return d


def _sha(ds, rel):
    return ds.meta["files"][rel]["sha256"]


def _imp(tmp_path, edges, **kw):
    kw.setdefault("progress", False)
    kw.setdefault("feature_dim", 8)
    return import_graph(tmp_path / "out", edges, **kw)


def _ids(ds, name):
    return np.asarray(ds.split(name))


# ---- formats ----------------------------------------------------------------------------------
def test_npy_both_shapes_csv_with_and_without_header_and_tsv_agree(graph, files, tmp_path):
    edges = graph[0]
    ref = import_graph(tmp_path / "e2", files / "e2.npy", feature_dim=8, progress=False)
    assert ref.num_nodes() == N and ref.num_edges() == len(edges) and ref.edge_types == [ET]
    indptr, indices = ref.csc(ET)  # in-edges, neighbours ascending, duplicates kept (directed import)
    order = np.lexsort((edges[:, 0], edges[:, 1]))
    np.testing.assert_array_equal(indices, edges[order, 0])
    np.testing.assert_array_equal(np.diff(indptr), np.bincount(edges[:, 1], minlength=N))
    assert verify(ref.root) == []
    for name, fmt in (("2e.npy", "npy"), ("edges.csv", "csv"), ("plain.csv", "csv"), ("edges.tsv", "tsv")):
        ds = import_graph(tmp_path / name.replace(".", "_"), files / name, feature_dim=8, progress=False)
        assert ds.meta["source"]["edges_format"] == fmt
        for rel in ref.meta["files"]:   # same topology, static scores, labels, splits and features
            assert _sha(ds, rel) == _sha(ref, rel), (name, rel)
    assert ds.meta["source"]["edges_header"] is False
    assert import_graph(tmp_path / "h", files / "edges.csv", feature_dim=8,
                        progress=False).meta["source"]["edges_header"] is True
    assert ref.meta["source"]["edges_layout"] == "(E, 2)"


def test_with_features_labels_and_split_files(graph, files, tmp_path):
    edges, labels, feats = graph
    ds = import_graph(tmp_path / "d", files / "e2.npy", features=files / "feats.npy", labels=files / "labels.npy",
                      splits=[files / f"{k}.npy" for k in ("train", "val", "test")], progress=False)
    assert verify(ds.root) == []
    np.testing.assert_array_equal(ds.feature_array(), feats)
    np.testing.assert_array_equal(ds.labels(), labels)
    assert ds.num_classes == 4 and ds.meta["labels"]["num_labeled"] == int((labels >= 0).sum())
    labelled = np.flatnonzero(labels >= 0)
    np.testing.assert_array_equal(_ids(ds, "train"), labelled[:100])
    np.testing.assert_array_equal(_ids(ds, "test"), labelled[150:])
    src = ds.meta["source"]
    assert src["features"]["file"].endswith("feats.npy") and src["labels"].endswith("labels.npy")
    assert src["splits"]["val"].endswith("val.npy") and src["num_nodes_from"].startswith("the rows of")
    # the pagerank bytes and degrees are those of the stored graph
    from lsm_gnn.datasets.pagerank import dataset_static_scores

    pr, deg = dataset_static_scores(ds)["node"]
    np.testing.assert_array_equal(ds.pagerank_u8(), pr)
    np.testing.assert_array_equal(ds.degree(), deg)


def test_raw_features_and_random_splits_over_labelled_nodes(graph, files, tmp_path):
    _, labels, feats = graph
    ds = import_graph(tmp_path / "d", files / "e2.npy", features=files / "feats.raw", feature_dtype="float16",
                      feature_dim=8, labels=files / "labels.npy", split_fractions="0.5,0.25,0.25", seed=3,
                      progress=False)
    assert verify(ds.root) == []
    lay = ds.features()
    assert (lay.dim, lay.dtype) == (8, np.float16) and ds.meta["source"]["features"]["read_as"] == "raw"
    np.testing.assert_array_equal(ds.feature_array(), feats.astype(np.float16))
    n_lab = int((labels >= 0).sum())
    parts = [_ids(ds, k) for k in ("train", "val", "test")]
    assert [p.size for p in parts] == [n_lab // 2, n_lab // 4, n_lab - n_lab // 2 - n_lab // 4]
    every = np.concatenate(parts)
    assert np.unique(every).size == every.size and (labels[every] >= 0).all()
    assert all(np.all(np.diff(p) > 0) for p in parts)  # stored sorted


def test_without_features_or_labels_is_seeded_and_marked(files, tmp_path):
    a = import_graph(tmp_path / "a", files / "e2.npy", seed=5, progress=False)
    b = import_graph(tmp_path / "b", files / "e2.npy", seed=5, progress=False)
    c = import_graph(tmp_path / "c", files / "e2.npy", seed=6, progress=False)
    assert verify(a.root) == []
    assert a.features().dim == 128 and a.features().dtype == np.float32
    assert a.meta["files"] == b.meta["files"]          # deterministic
    assert _sha(a, "features.bin") != _sha(c, "features.bin") and _sha(a, "splits/train.npy") != _sha(c, "splits/train.npy")
    src = a.meta["source"]
    assert src["features"]["random"] is True and src["features"]["seed"] == 5
    assert src["labels"].startswith("placeholder") and a.num_classes == 2
    assert [a.meta["splits"][k] for k in ("train", "val", "test")] == [144, 48, 48]


def test_undirected_stores_both_directions_once(tmp_path):
    e = np.array([[0, 1], [1, 0], [1, 2], [2, 2], [0, 1]])
    np.save(tmp_path / "e.npy", e)
    ds = import_graph(tmp_path / "d", tmp_path / "e.npy", undirected=True, num_nodes=4, feature_dim=4,
                      progress=False)
    indptr, indices = ds.csc(ET)
    pairs = {(int(s), int(d)) for d in range(4) for s in indices[indptr[d]:indptr[d + 1]]}
    assert pairs == {(0, 1), (1, 0), (1, 2), (2, 1), (2, 2)} and ds.num_edges() == 5
    assert ds.num_nodes() == 4 and ds.meta["source"]["num_nodes_from"] == "--num-nodes"
    assert verify(ds.root) == []


def test_dgl_graph_file(graph, tmp_path):
    dgl = pytest.importorskip("dgl")
    import torch

    edges = graph[0]
    g = dgl.graph((torch.from_numpy(edges[:, 0]), torch.from_numpy(edges[:, 1])), num_nodes=N + 5)
    dgl.save_graphs(str(tmp_path / "g.bin"), [g])
    ds = import_graph(tmp_path / "d", tmp_path / "g.bin", feature_dim=4, progress=False)
    assert ds.num_nodes() == N + 5 and ds.num_edges() == len(edges)   # isolated nodes kept
    assert ds.meta["source"]["edges_format"] == "dgl" and verify(ds.root) == []


# ---- the CLI, simulate and train --------------------------------------------------------------
def test_cli_import_then_simulate_and_train(files, tmp_path):
    out = tmp_path / "mine"
    r = CliRunner().invoke(cli, ["dataset", "import", "--edges", str(files / "edges.csv"), "--out", str(out),
                                 "--labels", str(files / "labels.npy"), "--feature-dim", "16", "--seed", "1",
                                 "--no-progress"])
    assert r.exit_code == 0, r.output
    assert f"wrote {out}: {N} nodes" in r.output and "no --features" in r.output
    r = CliRunner().invoke(cli, ["dataset", "verify", str(out)])
    assert r.exit_code == 0 and "OK" in r.output
    r = CliRunner().invoke(cli, ["simulate", str(out), "--max-batches", "3", "--policy", "lru", "--json",
                                 "--batch-size", "32", "--fanouts", "4,4", "--no-progress"])
    assert r.exit_code == 0, r.output
    sim = json.loads(r.output)
    assert sim["trace"]["batches"] == 3 and sim["trace"]["num_rows"] == N and set(sim["storage_rows_vs_min"]) == {"lru"}
    r = CliRunner().invoke(cli, ["train", "--dataset", str(out), "--epochs", "1", "--warmup", "1", "--timed", "2",
                                 "--batch-size", "32", "--fanouts", "4,4", "--threads", "1", "--set", "model.hidden=8",
                                 "--record", str(tmp_path / "rec.json"), "--quiet", "--json"])
    assert r.exit_code == 0, r.output
    rec = json.loads(r.output)
    assert rec["status"] == "complete" and rec["metrics"]["rows"]["requests"] > 0


def test_cli_import_errors(files, tmp_path):
    r = CliRunner().invoke(cli, ["dataset", "import", "--edges", str(files / "e2.npy"), "--out", str(tmp_path / "x"),
                                 "--splits", "a.npy,b.npy,c.npy", "--split-fractions", "0.5,0.5,0"])
    assert isinstance(r.exception, InputError) and "--splits and --split-fractions" in str(r.exception)
    r = CliRunner().invoke(cli, ["dataset", "import", "--out", str(tmp_path / "x")])
    assert r.exit_code == 2 and "--edges" in r.output
    out = tmp_path / "y"
    assert CliRunner().invoke(cli, ["dataset", "import", "--edges", str(files / "e2.npy"), "--out", str(out),
                                    "--feature-dim", "4", "--no-progress"]).exit_code == 0
    r = CliRunner().invoke(cli, ["dataset", "import", "--edges", str(files / "e2.npy"), "--out", str(out)])
    assert isinstance(r.exception, InputError) and "already exists" in str(r.exception)


# ---- bad inputs: each error names the file (or argument) and field ------------------------------
def _err(exc_type, fn, *texts):
    with pytest.raises(exc_type) as e:
        fn()
    for t in texts:
        assert t in str(e.value), (t, str(e.value))
    return e.value


def test_bad_edge_files(tmp_path):
    p = tmp_path / "f.npy"
    np.save(p, np.array([[0.0, 1.5], [2.0, 3.0]]))
    e = _err(DataError, lambda: _imp(tmp_path, p), "f.npy", "integers", "float64")
    assert e.path == str(p)
    np.save(p, np.zeros((4, 3), np.int64))
    _err(DataError, lambda: _imp(tmp_path, p), "f.npy", "shape", "(4, 3)")
    np.save(p, np.array([[0, 1], [1, 9]]))
    _err(DataError, lambda: _imp(tmp_path, p, num_nodes=5), "f.npy", "destination id", "edge 1",
         "[0, 5)", "found 9")
    np.save(p, np.array([[0, 1], [-1, 2]]))
    _err(DataError, lambda: _imp(tmp_path, p), "f.npy", "source id", "found -1")
    c = tmp_path / "f.csv"
    c.write_text("src,dst\n0,1\n1,2.5\n")
    _err(DataError, lambda: _imp(tmp_path, c), "f.csv", "line 3, column 2", "destination id must be an integer",
         "'2.5'")
    c.write_text("0,1\nx,2\n")
    _err(DataError, lambda: _imp(tmp_path, c), "f.csv", "line 2, column 1", "'x'")
    c.write_text("0,1\n1\n")
    _err(DataError, lambda: _imp(tmp_path, c), "f.csv", "line 2, column 2")
    c.write_text("0,1,2\n1,2,3\n")
    _err(DataError, lambda: _imp(tmp_path, c), "f.csv", "columns", "expected 2, found 3")
    c.write_text("0,1\n4,2\n")
    _err(DataError, lambda: _imp(tmp_path, c, num_nodes=3), "f.csv", "source id", "line 2", "found 4")
    t = tmp_path / "f.txt"
    t.write_text("0 1\n")
    _err(DataError, lambda: _imp(tmp_path, t), "f.txt", "unknown edge file format", ".csv")
    _err(DataError, lambda: _imp(tmp_path, tmp_path / "none.npy"), "none.npy", "does not exist")
    assert not (tmp_path / "out").exists()


def test_bad_features(files, tmp_path):
    raw = tmp_path / "f.bin"
    raw.write_bytes(b"\0" * 100)
    _err(DataError, lambda: _imp(tmp_path, files / "e2.npy", features=raw, feature_dim=8),
         "f.bin", "expected a multiple of the row size 32 bytes", "found 100 bytes")
    _err(DataError, lambda: _imp(tmp_path, files / "e2.npy", features=raw, feature_dim=None),
         "f.bin", "--feature-dim")
    p = tmp_path / "f.npy"
    np.save(p, np.zeros((N - 1, 8), np.float32))
    _err(DataError, lambda: _imp(tmp_path, files / "e2.npy", features=p, num_nodes=N), "f.npy", "rows",
         f"expected {N}, found {N - 1}")
    np.save(p, np.zeros((N, 8), np.int32))
    _err(DataError, lambda: _imp(tmp_path, files / "e2.npy", features=p), "f.npy", "dtype", "int32")
    np.save(p, np.zeros((N, 8), np.float32))
    _err(DataError, lambda: _imp(tmp_path, files / "e2.npy", features=p, feature_dim=4), "f.npy", "dim",
         "expected 4, found 8")
    bad = np.zeros((N, 8), np.float32)
    bad[17, 3] = np.nan
    np.save(p, bad)
    _err(DataError, lambda: _imp(tmp_path, files / "e2.npy", features=p), "f.npy", "row 17", "non-finite")


def test_bad_labels(files, tmp_path):
    p = tmp_path / "y.npy"
    np.save(p, np.zeros(N, np.float64))
    _err(DataError, lambda: _imp(tmp_path, files / "e2.npy", labels=p), "y.npy", "labels", "integer", "float64")
    np.save(p, np.zeros(N + 3, np.int64))
    _err(DataError, lambda: _imp(tmp_path, files / "e2.npy", labels=p, num_nodes=N), "y.npy", "labels",
         f"expected {N}, found {N + 3}")
    y = np.zeros(N, np.int64)
    y[4] = -2
    np.save(p, y)
    _err(DataError, lambda: _imp(tmp_path, files / "e2.npy", labels=p), "y.npy", "node 4", "found -2")
    y[4] = 7
    np.save(p, y)
    _err(DataError, lambda: _imp(tmp_path, files / "e2.npy", labels=p, num_classes=3), "y.npy", "node 4",
         "[0, 3)", "found 7")
    np.save(p, np.full(N, -1, np.int64))
    _err(DataError, lambda: _imp(tmp_path, files / "e2.npy", labels=p), "y.npy", "no labelled node")


def test_bad_splits(files, tmp_path):
    names = ("train", "val", "test")

    def run(train, val, test, **kw):
        paths = []
        for k, ids in zip(names, (train, val, test)):
            np.save(tmp_path / f"s_{k}.npy", ids)
            paths.append(tmp_path / f"s_{k}.npy")
        return _imp(tmp_path, files / "e2.npy", labels=files / "labels.npy", splits=paths, **kw)

    labels = np.load(files / "labels.npy")
    lab, unl = np.flatnonzero(labels >= 0), np.flatnonzero(labels < 0)
    _err(DataError, lambda: run(lab[:5].astype(np.float64), lab[5:8], lab[8:10]), "s_train.npy", "train",
         "integers", "float64")
    _err(DataError, lambda: run(lab[:5], np.r_[lab[5:8], N + 1], lab[8:10]), "s_val.npy", "val",
         f"[0, {N})", f"found {N + 1}")
    _err(DataError, lambda: run(lab[:5], lab[4:8], lab[8:10]), "s_val.npy", "disjoint",
         f"node {lab[4]} in train and val")
    _err(DataError, lambda: run(lab[:5], lab[5:8], np.r_[lab[8:10], lab[8]]), "s_test.npy", "twice")
    _err(DataError, lambda: run(lab[:5], lab[5:8], np.r_[lab[8:10], unl[0]]), "s_test.npy", "test",
         "no label", f"node {unl[0]}")
    _err(InputError, lambda: _imp(tmp_path, files / "e2.npy", split_fractions="0.9,0.2,0.1"), "--split-fractions")
    _err(InputError, lambda: _imp(tmp_path, files / "e2.npy", splits=["a.npy", "b.npy"]), "--splits")


# ---- the writer's own checks (shared with the synthetic and real datasets) -----------------------
def _writer(tmp_path, n=10):
    w = DatasetWriter(tmp_path / "w", "w")
    w.add_node_type("paper", n)
    return w


def test_writer_refuses_float_and_out_of_range_ids(tmp_path):
    with _writer(tmp_path) as w:
        _err(InputError, lambda: w.add_edges("paper", "cites", "paper", np.array([0.0, 1.9]), np.array([1, 2])),
             "add_edges(paper__cites__paper)", "field src", "integers", "float64")
        _err(InputError, lambda: w.add_edges("paper", "cites", "paper", [0, 1], [1, 10]),
             "field dst", "edge 1", "[0, 10)", "found 10")
        _err(InputError, lambda: w.add_edges("paper", "cites", "author", [0], [1]), "'author'", "not declared")
        _err(InputError, lambda: w.add_node_type("x", 2.5), "add_node_type('x')", "num_nodes")


def test_writer_checks_labels_splits_and_static(tmp_path):
    with _writer(tmp_path) as w:
        w.add_edges("paper", "cites", "paper", np.arange(9), np.arange(1, 10))
        with w.feature_file(2, "float32") as f:
            f.write(np.zeros((10, 2)))
        _err(InputError, lambda: w.set_labels("paper", np.zeros(10), 3), "set_labels('paper')", "float64")
        _err(InputError, lambda: w.set_labels("paper", np.full(10, 3), 3), "labels", "node 0", "[0, 3)", "found 3")
        _err(InputError, lambda: w.set_labels("paper", np.zeros(9, np.int64), 3), "labels", "(10,)", "(9,)")
        y = np.zeros(10, np.int64)
        y[9] = -1
        w.set_labels("paper", y, 3)
        _err(InputError, lambda: w.set_splits([0, 1], [1, 2], [3]), "set_splits(val)", "disjoint")
        _err(InputError, lambda: w.set_splits([0, 1], [2], [9]), "set_splits(test)", "no label", "node 9")
        _err(InputError, lambda: w.set_splits([0, 1.0], [2], [3]), "set_splits(train)", "integers")
        _err(InputError, lambda: w.set_splits([0, 10], [2], [3]), "set_splits(train)", "[0, 10)", "found 10")
        w.set_splits([0, 1], [2], [3])
        _err(InputError, lambda: w.set_static("paper", np.zeros(9, np.uint8), np.zeros(10, np.int64)),
             "set_static('paper')", "pagerank_u8", "(10,)", "(9,)")
        _err(InputError, lambda: w.set_static("paper", np.full(10, 300), np.zeros(10, np.int64)),
             "pagerank_u8", "[0, 255]", "found 300")
        _err(InputError, lambda: w.set_static("paper", np.zeros(10, np.uint8), np.zeros(10)), "degree", "float64")
        _err(InputError, w.commit, "static scores missing", "paper")
        w.add_static_scores()
        ds = w.commit()
    assert verify(ds.root) == []


def test_writer_checks_splits_against_labels_set_later(tmp_path):
    with _writer(tmp_path) as w:
        w.set_splits([0, 1], [2], [3])
        _err(InputError, lambda: w.set_labels("paper", np.r_[np.zeros(3, np.int64), -1, np.zeros(6, np.int64)], 2),
             "set_splits(test)", "no label", "node 3")


# ---- opening a dataset checks its metadata against its files -----------------------------------
@pytest.fixture
def small(tmp_path):
    np.save(tmp_path / "e.npy", np.array([[i, (i * 7 + 1) % 600] for i in range(600)]))
    return import_graph(tmp_path / "ds", tmp_path / "e.npy", feature_dim=8, progress=False)


def _edit_meta(ds, fn):
    meta = json.loads((ds.root / "metadata.json").read_text())
    fn(meta)
    (ds.root / "metadata.json").write_text(json.dumps(meta))


@pytest.mark.parametrize("delta, file, text", [
    (1000, "features.bin", "too small for metadata.json field features.num_rows = 1600"),
    (-1, "metadata.json", "field features.num_rows: disagrees with node_types"),
])
def test_num_rows_wrong_is_a_clear_error_on_open(small, delta, file, text):
    _edit_meta(small, lambda m: m["features"].__setitem__("num_rows", m["features"]["num_rows"] + delta))
    e = _err(DataError, lambda: Dataset(small.root), text)
    assert e.path.endswith(file)
    assert verify(small.root)  # verify reports it too


def test_counts_disagreeing_with_files_are_clear_errors_on_open(small, tmp_path):
    _edit_meta(small, lambda m: m["edge_types"][ET].__setitem__("num_edges", 601))
    _err(DataError, lambda: Dataset(small.root), f"topology/{ET}/csc_indices.npy",
         f"edge_types.{ET}.num_edges", "expected (601,), found (600,)")
    _edit_meta(small, lambda m: m["edge_types"][ET].__setitem__("num_edges", 600))
    _edit_meta(small, lambda m: m["splits"].__setitem__("val", 119))
    _err(DataError, lambda: Dataset(small.root), "splits/val.npy", "splits.val", "expected (119,), found (120,)")
    _edit_meta(small, lambda m: m["splits"].__setitem__("val", 120))
    np.save(small.root / "labels/node.npy", np.zeros(599, np.int64))
    _err(DataError, lambda: Dataset(small.root), "labels/node.npy", "node_types.node.num_nodes",
         "expected (600,), found (599,)")
    np.save(small.root / "labels/node.npy", np.zeros(600, np.int32))
    _err(DataError, lambda: Dataset(small.root), "labels/node.npy", "dtype", "expected int64, found int32")
    np.save(small.root / "labels/node.npy", np.zeros(600, np.int64))
    p = small.root / f"topology/{ET}/csr_indptr.npy"
    p.write_bytes(p.read_bytes()[:-8])
    _err(DataError, lambda: Dataset(small.root), "csr_indptr.npy", "truncated")


def test_feature_layout_checks_on_open(small):
    _edit_meta(small, lambda m: m["features"].__setitem__("file_bytes", m["features"]["file_bytes"] + 4096))
    _err(DataError, lambda: Dataset(small.root), "metadata.json", "features.file_bytes")
    _edit_meta(small, lambda m: m["features"].__setitem__("file_bytes", m["features"]["file_bytes"] - 4096))
    with open(small.root / "features.bin", "ab") as f:
        f.write(b"\0" * 4096)
    _err(DataError, lambda: Dataset(small.root), "features.bin", "features.file_bytes")


def test_open_is_checked_once(small):
    ds = Dataset(small.root)
    assert ds.features() is ds.features()   # the checked layout, not rebuilt per call
