"""Our numba neighbour sampler against DGL's `dgl.sampling.sample_neighbors` on the same graph.

DGL is the reference: both samplers draw in-neighbours (our CSC, DGL's `edge_dir='in'`) uniformly
without replacement. On one seeded random *directed* graph (so the orientation matters; degrees
from 0 to above the fan-out) the tests check

(a) per-node counts: exactly min(fanout, in-degree) for every seed node, for both samplers;
(b) every sampled edge is an edge of the graph (u -> v, v the seed), none drawn twice;
(c) the distribution, over 2000 seeded sampling rounds: the frequency of each neighbour of a
    high-degree node, and of each fanout-subset of a small node's neighbours, is uniform and
    matches DGL's by chi-square tests at a fixed significance, and deliberately wrong samplers
    (biased towards low ids, or a contiguous window that has uniform marginals but wrong joint
    distribution) fail the same tests (negative controls).

Everything is seeded (our keys, `dgl.seed`, numpy generators); DGL is called with one seed node at a
time, which gives the same draws whatever the OpenMP thread count, so the p-values are fixed.
"""

from __future__ import annotations

import os
from itertools import combinations

os.environ.setdefault("DGLBACKEND", "pytorch")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

dgl = pytest.importorskip("dgl")  # optional (the GPU machine has none): the module skips without it
import torch  # noqa: E402
from scipy import stats  # noqa: E402

from lsm_gnn.datasets.format import DatasetWriter  # noqa: E402
from lsm_gnn.sampling import NeighborSampler  # noqa: E402

N = 300
ISOLATED, HUB, SMALL = 0, 1, 2        # in-degree 0 (no edges at all), 60, 8
HUB_DEG, SMALL_DEG = 60, 8
ROUNDS = 2000
ALPHA = 1e-3                          # a correct sampler must give p > ALPHA, a wrong one p <= ALPHA


def _graph_edges(seed=0):
    """Directed edges (src, dst): every node but ISOLATED gets distinct in-neighbours != itself."""
    rng = np.random.default_rng(seed)
    deg = rng.choice([1, 2, 3, 4, 5, 7, 10, 15, 25, 40], size=N)
    deg[ISOLATED], deg[HUB], deg[SMALL] = 0, HUB_DEG, SMALL_DEG
    src, dst = [], []
    for v in range(N):
        cand = np.setdiff1d(np.arange(1, N), [v])      # ISOLATED has no out-edges either
        src.append(rng.choice(cand, size=deg[v], replace=False))
        dst.append(np.full(deg[v], v))
    return np.concatenate(src).astype(np.int64), np.concatenate(dst).astype(np.int64)


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    """(dataset in our format, the same graph as a DGL graph, CSC indptr, CSC indices)."""
    src, dst = _graph_edges()
    rng = np.random.default_rng(1)
    with DatasetWriter(tmp_path_factory.mktemp("dglref") / "ds", "dgl-reference") as w:
        w.add_node_type("paper", N)
        w.add_edges("paper", "cites", "paper", src, dst)
        with w.feature_file(4, "float32") as f:
            f.write(rng.normal(size=(N, 4)))
        w.set_labels("paper", rng.integers(0, 2, N), 2)
        perm = rng.permutation(N)
        w.set_splits(np.sort(perm[:180]), np.sort(perm[180:240]), np.sort(perm[240:]))
        w.set_static("paper", np.zeros(N, np.uint8), np.bincount(dst, minlength=N))
        ds = w.commit()
    (etype,) = ds.edge_types
    indptr, indices = (np.array(a, dtype=np.int64) for a in ds.csc(etype))   # writable copies
    # the DGL graph is built from the stored CSC, so both samplers read the very same edges
    col = np.repeat(np.arange(N), np.diff(indptr))
    g = dgl.graph((torch.from_numpy(indices), torch.from_numpy(col)), num_nodes=N)
    return ds, g, indptr, indices


def sampler(ds, fanout):
    """Our sampler with one layer of `fanout` (the seed ids given to `sample` are arbitrary)."""
    return NeighborSampler(ds, [fanout], 1, shuffle=False, seed_ids=np.arange(N))


def ours(smp, seeds, key):
    """One layer of our sampler: global (src, dst) of the sampled edges."""
    seeds = np.asarray(seeds, dtype=np.int64)
    b = smp.sample(seeds, key_parts=key)
    (blk,) = b.blocks
    s, d = blk.src.numpy(), blk.dst.numpy()
    return b.input_nodes[s], seeds[d]


def dgls(g, seeds, fanout):
    sg = dgl.sampling.sample_neighbors(g, torch.as_tensor(np.asarray(seeds), dtype=torch.int64), fanout,
                                       edge_dir="in", replace=False)
    u, v = sg.edges()
    return u.numpy().astype(np.int64), v.numpy().astype(np.int64)


def test_graph_has_the_intended_shape(graph):
    _, g, indptr, indices = graph
    deg = np.diff(indptr)
    assert deg[ISOLATED] == 0 and ISOLATED not in indices
    assert deg[HUB] == HUB_DEG and deg[SMALL] == SMALL_DEG
    assert (deg < 3).any() and (deg > 10).any()
    np.testing.assert_array_equal(g.in_degrees().numpy(), deg)
    # directed: orientation matters (an out-neighbour sampler would fail the edge checks below)
    assert not np.array_equal(g.out_degrees().numpy(), deg)


@pytest.mark.parametrize("fanout", [1, 3, 10, -1])
def test_counts_and_edges_match_dgl(graph, fanout):
    ds, g, indptr, indices = graph
    deg = np.diff(indptr)
    want = deg if fanout < 0 else np.minimum(deg, fanout)
    edges = set(zip(indices.tolist(), np.repeat(np.arange(N), deg).tolist()))
    seeds = np.random.default_rng(fanout + 10).permutation(N)      # every node, ISOLATED included
    dgl.seed(fanout + 10)
    for name, (u, v) in (("ours", ours(sampler(ds, fanout), seeds, (0, 1))), ("dgl", dgls(g, seeds, fanout))):
        # (a) min(fanout, in-degree) neighbours per node, 0 for the isolated node
        np.testing.assert_array_equal(np.bincount(v, minlength=N), want, err_msg=name)
        # (b) every sampled (u, v) is an in-edge of v; without replacement no edge comes twice
        pairs = list(zip(u.tolist(), v.tolist()))
        assert set(pairs) <= edges, name
        assert len(set(pairs)) == len(pairs), name


# ---- (c) the distribution --------------------------------------------------------------------

def draws_ours(ds, node, fanout, rounds=ROUNDS):
    smp = sampler(ds, fanout)
    return [np.sort(ours(smp, [node], (7, r))[0]) for r in range(rounds)]


def draws_dgl(g, node, fanout, rounds=ROUNDS):
    dgl.seed(7)
    return [np.sort(dgls(g, [node], fanout)[0]) for _ in range(rounds)]


def draws_biased(neigh, fanout, rounds=ROUNDS):
    """Wrong on purpose: picks neighbour i with weight proportional to (d - i), favouring low ids."""
    rng = np.random.default_rng(3)
    w = np.arange(len(neigh), 0, -1, dtype=float)
    return [np.sort(rng.choice(neigh, fanout, replace=False, p=w / w.sum())) for _ in range(rounds)]


def draws_window(neigh, fanout, rounds=ROUNDS):
    """Wrong on purpose: `fanout` cyclically consecutive neighbours from a uniform start.

    Every neighbour is picked with probability fanout/d (uniform marginals), but only d of the
    C(d, fanout) subsets can occur."""
    rng = np.random.default_rng(4)
    d = len(neigh)
    return [np.sort(neigh[(s + np.arange(fanout)) % d]) for s in rng.integers(0, d, rounds)]


def marginal_counts(draws, neigh):
    cnt = np.zeros(len(neigh), np.int64)
    for dr in draws:
        cnt[np.searchsorted(neigh, dr)] += 1
    return cnt


def subset_counts(draws, neigh, fanout):
    index = {c: i for i, c in enumerate(combinations(neigh.tolist(), fanout))}
    cnt = np.zeros(len(index), np.int64)
    for dr in draws:
        cnt[index[tuple(dr.tolist())]] += 1
    return cnt


def marginal_p_uniform(cnt, fanout):
    """Chi-square goodness of fit of per-neighbour counts to fanout/d.

    Without replacement the indicators of one draw are negatively correlated, so Pearson's
    statistic is (d - k)/(d - 1) times a chi-square with d - 1 degrees of freedom; it is rescaled
    by (d - 1)/(d - k) before the tail probability is taken."""
    d = len(cnt)
    stat = stats.chisquare(cnt, np.full(d, cnt.sum() / d)).statistic
    return float(stats.chi2.sf(stat * (d - 1) / (d - fanout), d - 1))


def marginal_p_same(cnt_a, cnt_b, fanout):
    """Chi-square homogeneity of two samplers' per-neighbour counts (same rescaling as above)."""
    d = len(cnt_a)
    stat = stats.chi2_contingency(np.vstack([cnt_a, cnt_b]), correction=False).statistic
    return float(stats.chi2.sf(stat * (d - 1) / (d - fanout), d - 1))


def subset_p_uniform(cnt):
    """Subsets of one draw are one multinomial outcome: the plain chi-square test applies."""
    return float(stats.chisquare(cnt).pvalue)


def subset_p_same(cnt_a, cnt_b):
    return float(stats.chi2_contingency(np.vstack([cnt_a, cnt_b]), correction=False).pvalue)


def test_hub_neighbours_are_picked_uniformly_and_like_dgl(graph):
    ds, g, indptr, indices = graph
    fanout = 10
    neigh = indices[indptr[HUB]:indptr[HUB + 1]]                 # sorted, distinct
    ours_c = marginal_counts(draws_ours(ds, HUB, fanout), neigh)
    dgl_c = marginal_counts(draws_dgl(g, HUB, fanout), neigh)
    assert ours_c.sum() == dgl_c.sum() == ROUNDS * fanout
    assert marginal_p_uniform(ours_c, fanout) > ALPHA
    assert marginal_p_uniform(dgl_c, fanout) > ALPHA
    assert marginal_p_same(ours_c, dgl_c, fanout) > ALPHA
    # negative control: the same statistics reject a sampler biased towards low ids
    bad = marginal_counts(draws_biased(neigh, fanout), neigh)
    assert marginal_p_uniform(bad, fanout) <= ALPHA
    assert marginal_p_same(bad, dgl_c, fanout) <= ALPHA


def test_every_subset_is_equally_likely_and_like_dgl(graph):
    ds, g, indptr, indices = graph
    fanout = 3                                                      # C(8, 3) = 56 subsets, ~36 draws each
    neigh = indices[indptr[SMALL]:indptr[SMALL + 1]]
    ours_c = subset_counts(draws_ours(ds, SMALL, fanout), neigh, fanout)
    dgl_c = subset_counts(draws_dgl(g, SMALL, fanout), neigh, fanout)
    assert subset_p_uniform(ours_c) > ALPHA
    assert subset_p_uniform(dgl_c) > ALPHA
    assert subset_p_same(ours_c, dgl_c) > ALPHA
    # negative controls: the window sampler has exactly uniform marginals, so only the subset test
    # catches it; the biased sampler fails both
    window = draws_window(neigh, fanout)
    assert marginal_p_uniform(marginal_counts(window, neigh), fanout) > ALPHA
    assert subset_p_uniform(subset_counts(window, neigh, fanout)) <= ALPHA
    assert subset_p_same(subset_counts(window, neigh, fanout), dgl_c) <= ALPHA
    assert subset_p_uniform(subset_counts(draws_biased(neigh, fanout), neigh, fanout)) <= ALPHA
