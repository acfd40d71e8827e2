"""Synthetic generator and static scores: determinism, graph statistics, learnable features,
PageRank against a slow reference, and clear errors for bad arguments."""

from __future__ import annotations

import json

import numpy as np
import pytest

from lsm_gnn.datasets.format import Dataset
from lsm_gnn.datasets.pagerank import csc_from_edges, dataset_static_scores, pagerank, percentile_byte
from lsm_gnn.datasets.stats import degree_summary, homophily, summary
from lsm_gnn.datasets.synthetic import generate, igbh_node_counts, resolve_size
from lsm_gnn.datasets.verify import verify
from lsm_gnn.utils.errors import InputError

N = 4000
DIM = 16


@pytest.fixture(scope="module")
def homo(tmp_path_factory) -> Dataset:
    return generate(tmp_path_factory.mktemp("syn") / "homo", N, seed=3, feature_dim=DIM, progress=False)


@pytest.fixture(scope="module")
def hetero(tmp_path_factory) -> Dataset:
    return generate(tmp_path_factory.mktemp("syn") / "hetero", 3000, seed=1, heterogeneous=True,
                    feature_dim=8, progress=False)


def _coo(ds, et):
    indptr, indices = ds.csc(et)
    dst = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
    return np.asarray(indices), dst


# ---- determinism ------------------------------------------------------------------------------
def test_same_seed_same_bytes(homo, tmp_path):
    again = generate(tmp_path / "again", N, seed=3, feature_dim=DIM, progress=False)
    assert again.meta["files"] == homo.meta["files"]  # sha256 of every file, features included
    assert json.loads((again.root / "metadata.json").read_text()) == homo.meta


def test_other_seed_other_graph(homo, tmp_path):
    other = generate(tmp_path / "other", N, seed=4, feature_dim=DIM, progress=False)
    for rel in ("features.bin", "topology/paper__cites__paper/csc_indices.npy", "labels/paper.npy"):
        assert other.meta["files"][rel]["sha256"] != homo.meta["files"][rel]["sha256"], rel


def test_overwrite_needed_for_existing_dir(homo):
    with pytest.raises(InputError, match="already exists"):
        generate(homo.root, N, seed=3, feature_dim=DIM, progress=False)


# ---- graph statistics -------------------------------------------------------------------------
def test_homogeneous_graph_shape(homo):
    src, dst = _coo(homo, "paper__cites__paper")
    n = homo.num_nodes()
    assert n == N and homo.is_homogeneous
    assert not (src == dst).any(), "self loops"
    keys = src * n + dst
    assert np.unique(keys).size == keys.size, "duplicate edges"
    rev = np.sort(dst * n + src)
    assert np.array_equal(np.sort(keys), rev), "not symmetric"
    deg = np.asarray(homo.degree())
    assert np.array_equal(deg, np.bincount(dst, minlength=n))
    s = degree_summary(deg)
    assert s["min"] == 1 and s["isolated"] == 0
    assert 11.5 < s["mean"] < 12.6          # target 12.07 (IGB-small)
    assert s["max"] > 12 * s["mean"]         # heavy tail
    assert s["median"] < s["mean"]


def test_hubs_are_scattered_over_ids(homo):
    """Ids are permuted: the top-degree nodes are not crowded at low ids (R-MAT puts them at 0)."""
    deg = np.asarray(homo.degree())
    top = np.argsort(deg)[-40:]
    assert np.median(top) > N / 8
    assert (top > N / 2).sum() >= 8


def test_labels_splits_and_homophily(homo):
    y = np.asarray(homo.labels())
    assert homo.num_classes == 19
    assert set(np.unique(y)) == set(range(19))
    assert np.bincount(y).min() > 0.5 * N / 19
    tr, va, te = (np.asarray(homo.split(s)) for s in ("train", "val", "test"))
    assert (tr.size, va.size, te.size) == (int(0.6 * N), int(0.2 * N), N - int(0.8 * N))
    assert np.array_equal(np.sort(np.concatenate([tr, va, te])), np.arange(N))
    assert homophily(homo) > 3 * (1 / 19)   # classes follow the topology


def test_features_are_learnable(homo):
    """Nearest-centroid on raw features beats chance; averaging over neighbours beats it more."""
    x = np.asarray(homo.feature_array(), dtype=np.float64)
    assert x.shape == (N, DIM) and np.isfinite(x).all()
    y = np.asarray(homo.labels())
    tr, te = np.asarray(homo.split("train")), np.asarray(homo.split("test"))

    def accuracy(f):
        cent = np.stack([f[tr][y[tr] == c].mean(0) for c in range(19)])
        dist = ((f[te][:, None, :] - cent[None]) ** 2).sum(-1)
        return (dist.argmin(1) == y[te]).mean()

    src, dst = _coo(homo, "paper__cites__paper")
    agg = x.copy()
    np.add.at(agg, dst, x[src])
    agg /= (np.asarray(homo.degree()) + 1)[:, None]
    alone, smoothed = accuracy(x), accuracy(agg)
    assert alone > 4 / 19
    assert smoothed > alone + 0.1


def test_feature_dtype_and_padding(tmp_path):
    ds = generate(tmp_path / "f16", 300, feature_dim=100, feature_dtype="float16", progress=False)
    lay = ds.features()
    assert lay.dtype == np.float16 and lay.row_bytes == 200 and lay.row_stride == 256
    assert lay.file_bytes % 4096 == 0
    assert np.isfinite(np.asarray(ds.feature_array(), dtype=np.float32)).all()


def test_heterogeneous_types_and_reverse_relations(hetero):
    assert set(hetero.node_types) == {"paper", "author", "fos", "institute"}
    assert list(hetero.features().type_offsets) == ["paper", "author", "fos", "institute"]
    counts = igbh_node_counts(3000)
    for t, n in counts.items():
        assert hetero.num_nodes(t) == n
    for fwd, rev in (("paper__written_by__author", "author__rev_written_by__paper"),
                     ("paper__topic__fos", "fos__rev_topic__paper"),
                     ("author__affiliated_to__institute", "institute__rev_affiliated_to__author")):
        s, d = _coo(hetero, fwd)
        rs, rd = _coo(hetero, rev)
        assert s.size > 0
        n_d = hetero.num_nodes(hetero.edge_type_triple(fwd)[2])
        assert np.array_equal(np.sort(s * n_d + d), np.sort(rd * n_d + rs))
    assert hetero.label_type == "paper"
    assert hetero.features().num_rows == sum(counts.values())
    # degree is the in-degree over every relation (reverse relations included)
    deg = np.zeros(hetero.num_nodes("author"), np.int64)
    for et in hetero.edge_types:
        if hetero.edge_type_triple(et)[2] == "author":
            deg += np.diff(np.asarray(hetero.csc(et)[0]))
    assert np.array_equal(np.asarray(hetero.degree("author")), deg)


def test_igbh_counts_follow_the_real_ratios():
    assert igbh_node_counts(100_000) == {"paper": 100_000, "author": 357_041, "institute": 8_738, "fos": 84_220}
    assert igbh_node_counts(1_000_000)["author"] == 1_926_066
    mid = igbh_node_counts(3_000_000)
    assert 1_926_066 < mid["author"] < 15_544_654 and 14_751 < mid["institute"] < 23_256
    assert igbh_node_counts(1000)["author"] == round(357_041 / 100)


def test_summary_is_json(homo):
    s = json.loads(json.dumps(summary(homo)))
    assert s["num_nodes"] == N and s["degree"]["paper"]["min"] == 1
    assert sum(s["pagerank_u8"]["paper"]["histogram"]) == N
    assert s["features"][0]["bytes"] == N * 64


# ---- PageRank -----------------------------------------------------------------------------------
def _slow_pagerank(src, dst, n, damping=0.85, iterations=20, divide_by="in-degree"):
    """Edge by edge: the authors' compute_pagerank divides a node's value by its in-degree before
    sending it along each out-edge; textbook PageRank by its out-degree."""
    deg = np.bincount(dst if divide_by == "in-degree" else src, minlength=n)
    pv = np.full(n, 1.0 / n)
    for _ in range(iterations):
        new = np.full(n, (1 - damping) / n)
        for s, d in zip(src.tolist(), dst.tolist()):
            new[d] += damping * pv[s] / deg[s]
        pv = new
    return pv


def _directed(n=60, m=400, seed=0):
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    src[:n] = np.arange(n)  # every node has an out-edge
    dst[n:2 * n] = np.arange(n)  # and an in-edge
    return src, dst


def test_pagerank_matches_slow_reference():
    n = 60
    src, dst = _directed(n)
    indptr, indices = csc_from_edges(src, dst, n)
    assert np.array_equal(np.diff(indptr), np.bincount(dst, minlength=n))
    for variant in ("in-degree", "out-degree"):
        np.testing.assert_allclose(pagerank(indptr, indices, normalisation=variant),
                                   _slow_pagerank(src, dst, n, divide_by=variant), rtol=1e-12)


def test_the_default_normalisation_is_the_authors_in_degree_and_differs_on_a_directed_graph():
    n = 60
    src, dst = _directed(n)
    csc = csc_from_edges(src, dst, n)
    default, authors, textbook = (pagerank(*csc), pagerank(*csc, normalisation="in-degree"),
                                  pagerank(*csc, normalisation="out-degree"))
    assert np.array_equal(default, authors)
    assert (percentile_byte(authors) != percentile_byte(textbook)).mean() > 0.5
    # a symmetric graph: in-degree = out-degree for every node, the two are the same
    sym = csc_from_edges(np.concatenate((src, dst)), np.concatenate((dst, src)), n)
    np.testing.assert_allclose(pagerank(*sym), pagerank(*sym, normalisation="out-degree"), rtol=1e-12)
    with pytest.raises(InputError, match="normalisation.*in-degree.*found 'both'"):
        pagerank(*csc, normalisation="both")


def test_a_generated_dataset_records_its_pagerank_normalisation(tmp_path, homo):
    assert homo.static_method()["pagerank"] == {
        "normalisation": "in-degree", "damping": 0.85, "iterations": 20,
        "byte": "percentile: uint8(255 * rank // (N - 1)), ascending, ties by id"}
    ds = generate(tmp_path / "o", 500, feature_dim=4, pagerank="out-degree", progress=False)
    assert ds.static_method()["pagerank"]["normalisation"] == "out-degree"
    # the synthetic graph is symmetric: the same bytes as the default's
    assert np.array_equal(np.asarray(ds.pagerank_u8()),
                          np.asarray(generate(tmp_path / "i", 500, feature_dim=4, progress=False).pagerank_u8()))
    assert verify(ds.root) == []


def test_pagerank_star_and_dangling():
    # star: leaves 1..4 <-> centre 0; node 5 has no edges at all (sends nothing, gets teleport only)
    src = np.array([1, 2, 3, 4, 0, 0, 0, 0])
    dst = np.array([0, 0, 0, 0, 1, 2, 3, 4])
    pr = pagerank(*csc_from_edges(src, dst, 6))
    assert pr.argmax() == 0 and pr[5] == pytest.approx(0.15 / 6)
    assert np.allclose(pr[1:5], pr[1])
    b = percentile_byte(pr)
    assert b[0] == 255 and b[5] == 0


def test_percentile_byte_semantics():
    scores = np.array([0.5, 0.1, 0.9, 0.1, 0.3])
    # ascending ranks (stable ties): 1->0, 3->1, 4->2, 0->3, 2->4; byte = 255*rank//4
    assert percentile_byte(scores).tolist() == [191, 0, 255, 63, 127]
    big = percentile_byte(np.random.default_rng(1).random(10_000))
    assert big.min() == 0 and big.max() == 255
    assert np.abs(np.bincount(big, minlength=256)[:255] - 10_000 / 256).max() <= 2


def test_stored_static_scores_recompute(homo, hetero):
    for ds in (homo, hetero):
        for t, (pr, deg) in dataset_static_scores(ds).items():
            assert np.array_equal(pr, np.asarray(ds.pagerank_u8(t))), t
            assert np.array_equal(deg, np.asarray(ds.degree(t))), t
    # central nodes get high bytes
    deg, pr = np.asarray(homo.degree()), np.asarray(homo.pagerank_u8())
    assert pr[deg.argmax()] >= 250
    assert np.corrcoef(deg, pr)[0, 1] > 0.4


def test_pagerank_bad_input():
    with pytest.raises(InputError, match="indptr"):
        pagerank(np.array([0, 2, 3]), np.array([0, 1]))
    with pytest.raises(InputError, match="range"):
        csc_from_edges(np.array([0, 5]), np.array([1, 1]), 3)


# ---- bad arguments ------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, match", [
    ({"size": "huge"}, "size: expected one of tiny, small, medium"),
    ({"size": 1}, "integer >= 2"),
    ({"size": "-5"}, "integer >= 2"),
    ({"feature_dim": 0}, "feature_dim"),
    ({"feature_dtype": "int8"}, "feature_dtype: expected one of float32"),
    ({"num_classes": 1}, "num_classes"),
    ({"seed": -1}, "seed"),
    ({"avg_degree": 0}, "avg_degree"),
])
def test_bad_arguments(tmp_path, kwargs, match):
    kwargs = {"size": 100, **kwargs}
    with pytest.raises(InputError, match=match):
        generate(tmp_path / "x", progress=False, **kwargs)
    assert not (tmp_path / "x").exists()


def test_resolve_size():
    assert resolve_size("tiny") == ("tiny", 100_000)
    assert resolve_size("small") == ("small", 1_000_000)
    assert resolve_size("medium") == ("medium", 10_000_000)
    assert resolve_size("2500") == ("2500", 2500)
