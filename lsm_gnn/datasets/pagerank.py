"""Static node scores for the cache's eviction policy: PageRank as a percentile byte, and degree.

Semantics follow the LSM-GNN authors' code (github.com/jeongminpark417/COALA-GNN, commit 57f0284
"page rank", evaluation/page_rank_node_list_gen.py, `compute_pagerank`): damping 0.85, 20
synchronous iterations from the uniform vector, each iteration

    contrib = pv / in_degree;   pv = (1 - d) / N + d * sum over in-edges of contrib

The authors divide each node's value by its *in*-degree (`g.in_degrees()`) before sending it
along its out-edges: normalisation "in-degree", the default. Textbook PageRank divides by the
out-degree: normalisation "out-degree", kept as a named option (the scores of lsm-gnn before
this default changed). On a symmetric graph (every synthetic graph here: reverse edges included)
the two are the same; on a directed real graph most bytes differ. A node with a zero divisor
sends nothing (its mass leaks; the authors' division would make it infinite, our synthetic graphs
have minimum degree 1).

The scores are then rank-normalised: nodes sorted by PageRank ascending (ties by id, stable) get
`uint8(255 * rank // (N - 1))`, so 0 is the least and 255 the most central node. Which
normalisation a dataset used is in its metadata.json (`static`, written by `method()`).

Heterogeneous graphs: the reference runs PageRank per edge type; we run it once on the
*homogeneous view* (every relation, reverse relations included, over the flat feature-row id
space of `features.type_offsets`), so the bytes of different node types are comparable inside
the one shared cache that holds rows of every type.
"""

from __future__ import annotations

import numba
import numpy as np

from lsm_gnn.utils.errors import InputError

DAMPING = 0.85
ITERATIONS = 20
# what each node's value is divided by before it is sent along its out-edges
NORMALISATIONS = {"in-degree": "the authors' compute_pagerank (COALA-GNN 57f0284): pv / g.in_degrees()",
                  "out-degree": "textbook PageRank: pv / out-degree"}
NORMALISATION = "in-degree"


def check_normalisation(normalisation: str) -> str:
    if normalisation not in NORMALISATIONS:
        raise InputError(f"PageRank normalisation: expected one of {sorted(NORMALISATIONS)}, found {normalisation!r}")
    return normalisation


def method(normalisation: str = NORMALISATION, *, damping: float = DAMPING, iterations: int = ITERATIONS) -> dict:
    """How the static scores were computed, as a dataset's metadata.json records it (`static`)."""
    check_normalisation(normalisation)
    return {"pagerank": {"normalisation": normalisation, "damping": float(damping), "iterations": int(iterations),
                         "byte": "percentile: uint8(255 * rank // (N - 1)), ascending, ties by id"},
            "degree": "in-degree over all relations"}


@numba.njit(cache=True)
def _counting_csc(src, dst, n):
    """CSC by destination with a stable counting sort (O(E), no comparison sort)."""
    indptr = np.zeros(n + 1, dtype=np.int64)
    for v in dst:
        indptr[v + 1] += 1
    for i in range(n):
        indptr[i + 1] += indptr[i]
    fill = indptr[:-1].copy()
    indices = np.empty(src.size, dtype=np.int64)
    for e in range(src.size):
        v = dst[e]
        indices[fill[v]] = src[e]
        fill[v] += 1
    return indptr, indices


@numba.njit(parallel=True, cache=True)
def _pull_iteration(indptr, indices, contrib, base, damping, out):
    n = indptr.size - 1
    for v in numba.prange(n):
        acc = 0.0
        for e in range(indptr[v], indptr[v + 1]):
            acc += contrib[indices[e]]
        out[v] = base + damping * acc


def csc_from_edges(src: np.ndarray, dst: np.ndarray, num_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """(indptr over destinations, source ids) of a directed edge list, sources in input order."""
    src = np.ascontiguousarray(src, dtype=np.int64)
    dst = np.ascontiguousarray(dst, dtype=np.int64)
    if src.shape != dst.shape or src.ndim != 1:
        raise InputError(f"src and dst must be 1-D of equal length, found {src.shape} and {dst.shape}")
    if src.size:
        lo, hi = min(src.min(), dst.min()), max(src.max(), dst.max())
        if lo < 0 or hi >= num_nodes:
            raise InputError(f"edge endpoints must lie in [0, {num_nodes}), found range [{lo}, {hi}]")
    return _counting_csc(src, dst, int(num_nodes))


def pagerank(indptr: np.ndarray, indices: np.ndarray, *, damping: float = DAMPING,
             iterations: int = ITERATIONS, normalisation: str = NORMALISATION) -> np.ndarray:
    """PageRank (float64 per node) of the graph given as CSC: indptr over destinations, sources.

    `normalisation`: "in-degree" (the authors', default) or "out-degree" (textbook)."""
    check_normalisation(normalisation)
    indptr = np.ascontiguousarray(indptr, dtype=np.int64)
    indices = np.ascontiguousarray(indices, dtype=np.int64)
    n = indptr.size - 1
    if n <= 0:
        raise InputError("pagerank needs at least one node")
    if indptr[0] != 0 or indptr[-1] != indices.size:
        raise InputError(f"CSC indptr must start at 0 and end at len(indices)={indices.size}, "
                         f"found {indptr[0]}..{indptr[-1]}")
    if normalisation == "in-degree":
        divisor = np.diff(indptr).astype(np.float64)
    else:
        divisor = np.bincount(indices, minlength=n).astype(np.float64)
    inv = np.divide(1.0, divisor, out=np.zeros(n), where=divisor > 0)
    pv = np.full(n, 1.0 / n)
    nxt = np.empty(n)
    base = (1.0 - damping) / n
    for _ in range(iterations):
        _pull_iteration(indptr, indices, pv * inv, base, damping, nxt)
        pv, nxt = nxt, pv
    return pv


def percentile_byte(scores: np.ndarray) -> np.ndarray:
    """uint8(255 * rank // (N - 1)) of each score's ascending rank (ties broken by position)."""
    scores = np.asarray(scores)
    n = scores.size
    out = np.empty(n, dtype=np.uint8)
    if n == 0:
        return out
    order = np.argsort(scores, kind="stable")
    out[order] = (255 * np.arange(n, dtype=np.int64) // max(n - 1, 1)).astype(np.uint8)
    return out


def homogeneous_view(node_counts: dict[str, int], relations, type_order: list[str] | None = None):
    """Merge relations into one CSC over the flat id space (types concatenated in type_order).

    `relations` yields (src_type, dst_type, csc_indptr, csc_indices). Returns
    (indptr, indices, offsets) with offsets[t] the first flat id of type t.
    """
    order = list(type_order or node_counts)
    offsets, total = {}, 0
    for t in order:
        offsets[t] = total
        total += int(node_counts[t])
    srcs, dsts = [], []
    for src_type, dst_type, indptr, indices in relations:
        indptr = np.asarray(indptr)
        deg = np.diff(indptr)
        dsts.append(np.repeat(np.arange(deg.size, dtype=np.int64) + offsets[dst_type], deg))
        srcs.append(np.asarray(indices, dtype=np.int64) + offsets[src_type])
    src = np.concatenate(srcs) if srcs else np.zeros(0, np.int64)
    dst = np.concatenate(dsts) if dsts else np.zeros(0, np.int64)
    indptr, indices = csc_from_edges(src, dst, total)
    return indptr, indices, offsets


def static_scores(node_counts: dict[str, int], relations, type_order: list[str] | None = None,
                  *, damping: float = DAMPING, iterations: int = ITERATIONS,
                  normalisation: str = NORMALISATION) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """{ntype: (pagerank_u8, degree)} on the homogeneous view; degree = in-degree over all relations.

    With reverse relations present (as in every dataset we write) the in-degree is the number of
    incident edges. Percentiles are taken over all nodes of all types together.
    """
    relations = list(relations)
    if len(node_counts) == 1 and len(relations) == 1:
        (t,), (_, _, indptr, indices) = list(node_counts), relations[0]
        offsets = {t: 0}
    else:
        indptr, indices, offsets = homogeneous_view(node_counts, relations, type_order)
    pr_byte = percentile_byte(pagerank(indptr, indices, damping=damping, iterations=iterations,
                                       normalisation=normalisation))
    degree = np.diff(np.asarray(indptr))
    return {t: (pr_byte[off: off + node_counts[t]], degree[off: off + node_counts[t]])
            for t, off in offsets.items()}


# datasets written before the metadata recorded the method computed textbook PageRank
UNRECORDED = "out-degree"


def normalisation_of(ds) -> str:
    """The PageRank normalisation an opened `Dataset`'s static scores used (metadata `static`)."""
    method_ = ds.static_method() if hasattr(ds, "static_method") else ds.meta.get("static")
    return ((method_ or {}).get("pagerank") or {}).get("normalisation", UNRECORDED)


def dataset_static_scores(ds, normalisation: str | None = None) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Recompute the static scores of an opened `Dataset` (used by `prepare` and the tests), with
    the normalisation its metadata records (the default where it records none)."""
    if normalisation is None:
        normalisation = normalisation_of(ds)
    rels = []
    for et in ds.edge_types:
        s, _, d = ds.edge_type_triple(et)
        indptr, indices = ds.csc(et)
        rels.append((s, d, indptr, indices))
    counts = {t: ds.num_nodes(t) for t in ds.node_types}
    order = list(ds.features().type_offsets) if ds.meta.get("features") else None
    if order is not None:
        order += [t for t in counts if t not in order]
    return static_scores(counts, rels, order, normalisation=normalisation)
