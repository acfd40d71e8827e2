"""Synthetic IGB-like datasets (homogeneous, or IGBH-like heterogeneous) in the lsm-gnn format.

Recipe (docs/datasets.md has the measured statistics):

* Topology: vectorised noisy R-MAT (a=0.48, b=c=0.21, per-level jitter of +-50 % of b; PaRMAT's
  a=0.45 loses hub degree to the community rewiring below) on 2^ceil(log2 N) ids, endpoints >= N
  rejected, symmetrised, self loops and duplicates dropped, topped up until the
  undirected edge count reaches avg_degree * N / 2 (IGB-small: 12.07); every isolated node is
  then attached to a random node of its own community, so the minimum degree is 1 (as in IGB).
* Communities and classes: the top bits of an R-MAT id name its community (block); for a
  fraction HOMOPHILY of the draws the destination keeps its R-MAT low bits but takes the source's
  block, so edges stay inside communities far more often than chance. class = block % classes.
* Ids are permuted after generation so hubs and communities are scattered over the id space
  (what caching and page locality results depend on).
* Features: class centroid + standard normal noise, generated in fixed-size chunks, each from its
  own seeded RNG (so the bytes do not depend on threads), streamed to features.bin by two worker
  threads; never more than a few chunks in memory.
* Splits: a seeded random 60/20/20 permutation of the labelled nodes (all of them), stored sorted.

Everything is a pure function of (size, seed, parameters): the same call writes the same bytes.
"""

from __future__ import annotations

import math
import os
import shutil
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from tqdm import tqdm

from lsm_gnn.datasets.format import check_dataset_output, Dataset, DatasetWriter, row_stride_for
from lsm_gnn.utils.atomic import make_parent
from lsm_gnn.utils.errors import InputError


SIZES = {"tiny": 100_000, "small": 1_000_000, "medium": 10_000_000}
RECIPE_VERSION = 1

RMAT_ABC = (0.48, 0.21, 0.21)  # max degree 4,024 at 1M nodes (IGB-small: 4,292)
RMAT_NOISE = 0.5           # per-level jitter of b and c, relative to b (noisy R-MAT)
AVG_DEGREE = 12.07          # IGB-small / medium / large: 12.07 / 12.00 / 12.20
HOMOPHILY = 0.6             # fraction of R-MAT draws rewired to stay inside the source's block
MIN_BLOCK_BITS = 4          # a community holds at least 16 ids
FEATURE_SEPARATION = 2.26   # distance between two class centroids, in noise standard deviations
CHUNK_BYTES = 32 << 20      # float32 bytes per generated feature chunk (fixes the RNG streams)
from lsm_gnn.datasets.spec import FEATURE_DTYPES  # noqa: E402,F401  (the format's rule; imported from here too)

# IGBH node counts per size: paper, author, institute, fos (IGB, arXiv 2302.13522; as listed in
# `num_nodes`/`num_edges` of DGL's examples/graphbolt/rgcn/download.py, github.com/dmlc/dgl).
IGBH_COUNTS = {
    100_000: (100_000, 357_041, 8_738, 84_220),
    1_000_000: (1_000_000, 1_926_066, 14_751, 190_449),
    10_000_000: (10_000_000, 15_544_654, 23_256, 415_054),
    100_000_000: (100_000_000, 116_959_896, 26_524, 649_707),
    269_346_174: (269_346_174, 277_220_883, 26_918, 712_960),
}
# IGBH-small relation sizes per source node (written_by, topic: per paper; affiliated_to: per author)
WRITTEN_BY_PER_PAPER = 4_553_516 / 1_000_000
TOPIC_PER_PAPER = 7_234_122 / 1_000_000
AFFILIATED_PER_AUTHOR = 1_630_476 / 1_926_066
HETERO_TYPE_ORDER = ("paper", "author", "fos", "institute")  # GIDS feature-row order
POPULARITY_SKEW = 3.0       # index = floor(n * u**skew): heavy-tailed author/fos/institute popularity

# RNG stream ids, so that changing one stage never shifts the numbers drawn by another
_S_TOPOLOGY, _S_PERM, _S_SPLIT, _S_CENTROIDS, _S_FEATURES, _S_HETERO = range(6)


# --------------------------------------------------------------------------------------------
# arguments
def resolve_size(size: str | int) -> tuple[str, int]:
    """('tiny', 100000) for a size name, (str(N), N) for a node count."""
    if isinstance(size, str) and size in SIZES:
        return size, SIZES[size]
    try:
        n = int(size)
    except (TypeError, ValueError):
        raise InputError(f"size: expected one of {', '.join(SIZES)} or a node count, found {size!r}") from None
    if isinstance(size, float) or n < 2:
        raise InputError(f"size: a node count must be an integer >= 2, found {size!r}")
    from lsm_gnn.utils.bounds import check_nodes

    check_nodes(n, "size", "num_nodes", why=f"{n:,} nodes")  # before any table of n
    return str(n), n


def igbh_node_counts(num_papers: int) -> dict[str, int]:
    """Author/institute/fos counts for `num_papers`: log-log interpolation of IGBH's sizes."""
    xs = np.log(np.array(sorted(IGBH_COUNTS), dtype=np.float64))
    rows = np.array([IGBH_COUNTS[k] for k in sorted(IGBH_COUNTS)], dtype=np.float64)
    x = math.log(num_papers)
    out = {"paper": int(num_papers)}
    for j, t in enumerate(("author", "institute", "fos"), start=1):
        ys = np.log(rows[:, j])
        if x <= xs[0]:      # below tiny / above full: keep the end ratio to papers
            y = ys[0] + (x - xs[0])
        elif x >= xs[-1]:
            y = ys[-1] + (x - xs[-1])
        else:
            y = float(np.interp(x, xs, ys))
        out[t] = max(1, int(round(math.exp(y))))
    return out


# --------------------------------------------------------------------------------------------
# topology
def _rmat(rng: np.random.Generator, scale: int, count: int, block_shift: int, homophily: float):
    """`count` R-MAT draws on 2^scale ids; a `homophily` fraction keeps dst in src's block."""
    a0, b0, c0 = RMAT_ABC
    d0 = 1.0 - a0 - b0 - c0
    src = np.zeros(count, dtype=np.int64)
    dst = np.zeros(count, dtype=np.int64)
    for level in range(scale):
        # noisy R-MAT (Seshadhri, Pinar, Kolda 2011): per-level jitter of the quadrant
        # probabilities smooths plain R-MAT's oscillating, humped degree distribution
        mu = rng.uniform(-RMAT_NOISE, RMAT_NOISE) * min(b0, c0)
        a, b, c = a0 - 2 * mu * a0 / (a0 + d0), b0 + mu, c0 + mu
        r = rng.random(count, dtype=np.float32)
        bit = np.int64(1) << (scale - 1 - level)
        src[r >= a + b] |= bit
        dst[((r >= a) & (r < a + b)) | (r >= a + b + c)] |= bit
    inside = rng.random(count, dtype=np.float32) < homophily
    high = ~np.int64((1 << block_shift) - 1)
    dst[inside] = (src[inside] & high) | (dst[inside] & ~high)
    return src, dst


def _pair_keys(src, dst, n):
    """Undirected pair keys lo * n + hi, self loops dropped (not yet deduplicated)."""
    keep = (src < n) & (dst < n) & (src != dst)
    src, dst = src[keep], dst[keep]
    return np.minimum(src, dst) * n + np.maximum(src, dst)


def _unique_sorted(keys):
    keys = np.sort(keys)
    if keys.size:
        keys = keys[np.concatenate(([True], keys[1:] != keys[:-1]))]
    return keys


def community_graph(n: int, rng: np.random.Generator, *, avg_degree: float = AVG_DEGREE,
                    homophily: float = HOMOPHILY, num_blocks_hint: int = 8 * 19):
    """Undirected R-MAT graph with planted communities, before the id permutation.

    Returns (lo, hi, block): unique undirected pairs lo < hi and the block (community) of each id.
    """
    scale = max(1, math.ceil(math.log2(n)))
    block_bits = max(0, min(math.ceil(math.log2(max(num_blocks_hint, 1))), scale - MIN_BLOCK_BITS))
    shift = scale - block_bits
    target = int(round(avg_degree * n / 2))
    target = min(target, n * (n - 1) // 2)
    keys = np.zeros(0, dtype=np.int64)
    draws = int(target * 0.9)  # the first round undershoots on purpose; top-ups close the gap
    attached = np.zeros(0, dtype=np.int64)
    for _ in range(8):  # top up: duplicates, rejected ids and attachment shrink the first round's yield
        src, dst = _rmat(rng, scale, max(draws, 1), shift, homophily)
        fresh = _pair_keys(src, dst, n)
        del src, dst
        keys = _unique_sorted(np.concatenate((keys, fresh)))
        attached = _attach_isolated(n, keys, shift, rng)
        have = keys.size + attached.size
        if have >= target * 0.997 or draws == 0:
            break
        yield_ = max(fresh.size, 1) / max(draws, 1)
        draws = int(math.ceil((target - have) / max(yield_, 1e-3)))
    keys = _unique_sorted(np.concatenate((keys, attached)))
    block = np.arange(n, dtype=np.int64) >> shift
    return keys // n, keys % n, block


def _attach_isolated(n: int, keys: np.ndarray, shift: int, rng: np.random.Generator) -> np.ndarray:
    """Pair keys joining every isolated id to a random non-isolated id of its block (else anyone)."""
    deg = np.bincount(keys // n, minlength=n) + np.bincount(keys % n, minlength=n)
    isolated = np.flatnonzero(deg == 0)
    if isolated.size == 0:
        return np.zeros(0, dtype=np.int64)
    connected = np.flatnonzero(deg > 0)
    if connected.size == 0:  # no edges at all (tiny n): chain the isolated ids to id 0's partner
        connected = np.array([0 if isolated[0] != 0 else 1], dtype=np.int64)
        isolated = isolated[isolated != connected[0]]
    blocks_c = connected >> shift
    first = np.searchsorted(blocks_c, isolated >> shift, side="left")
    last = np.searchsorted(blocks_c, isolated >> shift, side="right")
    count = last - first
    pick = np.where(count > 0, first + (rng.random(isolated.size) * np.maximum(count, 1)).astype(np.int64),
                    rng.integers(0, connected.size, isolated.size))
    partner = connected[np.minimum(pick, connected.size - 1)]
    return np.minimum(isolated, partner) * n + np.maximum(isolated, partner)


def _skewed_pick(rng, lo: np.ndarray, size: np.ndarray) -> np.ndarray:
    """A heavy-tailed index in [lo, lo + size): low offsets are the popular ones."""
    u = rng.random(lo.size)
    return lo + np.minimum((size * u ** POPULARITY_SKEW).astype(np.int64), size - 1)


def _bipartite(rng, num_edges: int, src_class: np.ndarray, n_dst: int, num_classes: int,
               homophily: float):
    """Edges src -> dst; dst ids are grouped in contiguous class blocks (before permutation).

    Each edge draws a uniform source; with probability `homophily` its destination comes from the
    source's class block (else from a random block), heavy-tailed inside the block.
    """
    n_src = src_class.size
    src = rng.integers(0, n_src, num_edges)
    starts = (np.arange(num_classes + 1, dtype=np.int64) * n_dst) // num_classes
    cls = np.where(rng.random(num_edges) < homophily, src_class[src], rng.integers(0, num_classes, num_edges))
    size = starts[cls + 1] - starts[cls]
    empty = size == 0  # fewer dst nodes than classes: fall back to the whole range
    lo = np.where(empty, 0, starts[cls])
    size = np.where(empty, n_dst, size)
    dst = _skewed_pick(rng, lo, size)
    keys = _unique_sorted(src * n_dst + dst)
    return keys // n_dst, keys % n_dst


# --------------------------------------------------------------------------------------------
# features
def _chunk_rows(dim: int) -> int:
    return max(1, CHUNK_BYTES // (4 * dim))


def _feature_chunk(seed: int, type_index: int, chunk: int, classes: np.ndarray, centroids: np.ndarray,
                   dtype: np.dtype) -> np.ndarray:
    rng = np.random.default_rng([seed, _S_FEATURES, type_index, chunk])
    x = rng.standard_normal((classes.size, centroids.shape[1]), dtype=np.float32)
    x += centroids[classes]
    return x if dtype == np.float32 else x.astype(dtype)


def write_features(w: DatasetWriter, order, home_class: dict, dim: int, dtype: np.dtype,
                   num_classes: int, seed: int, progress: bool):
    """Stream `centroid[home class] + N(0, 1)` rows of every type in `order` to features.bin.

    Seeded and chunked (see the module docstring); `lsm-gnn dataset import` uses it with one class
    for the stand-in features of a graph imported without any."""
    rng = np.random.default_rng([seed, _S_CENTROIDS])
    scale = FEATURE_SEPARATION / math.sqrt(2 * dim)  # E|c_i - c_j| = separation noise sigmas
    centroids = (rng.standard_normal((num_classes, dim)) * scale).astype(np.float32)
    rows = _chunk_rows(dim)
    jobs = [(ti, j, home_class[t][j * rows:(j + 1) * rows])
            for ti, t in enumerate(order) for j in range(-(-home_class[t].size // rows))]
    total = sum(home_class[t].size for t in order)
    bar = tqdm(total=total, unit="rows", desc="features", disable=not progress or not sys.stderr.isatty())
    with w.feature_file(dim, dtype, type_order=list(order)) as f, ThreadPoolExecutor(2) as pool:
        pending = []
        for ti, j, cls in jobs:  # keep at most 4 chunks in flight: bounded memory
            pending.append(pool.submit(_feature_chunk, seed, ti, j, cls, centroids, dtype))
            if len(pending) >= 4:
                block = pending.pop(0).result()
                f.write(block)
                bar.update(len(block))
        for fut in pending:
            block = fut.result()
            f.write(block)
            bar.update(len(block))
    bar.close()


# --------------------------------------------------------------------------------------------
# the generator
def generate(root: str | os.PathLike, size: str | int = "tiny", *, seed: int = 0, heterogeneous: bool = False,
             feature_dim: int = 1024, feature_dtype: str = "float32", num_classes: int = 19,
             avg_degree: float = AVG_DEGREE, overwrite: bool = False, progress: bool = True,
             pagerank: str | None = None) -> Dataset:
    """Write a synthetic IGB-like dataset to `root` and return it opened.

    pagerank: the static scores' PageRank normalisation (lsm_gnn.datasets.pagerank.NORMALISATIONS;
    default the authors' in-degree; the graphs are symmetric, so both give the same bytes).

    size: 'tiny' (100k papers), 'small' (1M), 'medium' (10M) or a paper count. With
    `heterogeneous`, IGBH-like author/fos/institute nodes and relations are added (counts scaled
    as in IGBH) and labels stay on papers.
    """
    size_name, n = resolve_size(size)
    if not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InputError(f"seed: expected a non-negative integer, found {seed!r}")
    if not isinstance(feature_dim, (int, np.integer)) or feature_dim < 1:
        raise InputError(f"feature_dim: expected an integer >= 1, found {feature_dim!r}")
    if str(feature_dtype) not in FEATURE_DTYPES:
        raise InputError(f"feature_dtype: expected one of {', '.join(FEATURE_DTYPES)}, found {feature_dtype!r}")
    if not isinstance(num_classes, (int, np.integer)) or not 2 <= num_classes <= 65535:
        raise InputError(f"num_classes: expected an integer in [2, 65535], found {num_classes!r}")
    if not 0 < avg_degree <= n - 1:
        raise InputError(f"avg_degree: expected a value in (0, {n - 1}] for {n} nodes, found {avg_degree!r}")
    root = Path(root)
    root = check_dataset_output(root, overwrite)  # before any work: what --force may replace
    dtype = np.dtype(feature_dtype)

    counts = igbh_node_counts(n) if heterogeneous else {"paper": n}
    order = [t for t in HETERO_TYPE_ORDER if t in counts]
    feature_bytes = sum(counts.values()) * row_stride_for(feature_dim * dtype.itemsize)
    make_parent(root)
    free = shutil.disk_usage(root.parent).free
    if free < feature_bytes * 1.05:
        raise InputError(f"{root.parent}: {free / 2**30:.1f} GiB free, the features alone need "
                         f"{feature_bytes / 2**30:.1f} GiB")

    rng = np.random.default_rng([seed, _S_TOPOLOGY])
    lo, hi, block = community_graph(n, rng, avg_degree=avg_degree, num_blocks_hint=8 * num_classes)
    perm = np.random.default_rng([seed, _S_PERM]).permutation(n)
    lo, hi = perm[lo], perm[hi]
    labels = np.empty(n, dtype=np.int64)
    labels[perm] = block % num_classes

    source = {"generator": "lsm_gnn.datasets.synthetic", "recipe_version": RECIPE_VERSION,
              "size": size_name, "num_papers": n, "seed": int(seed), "heterogeneous": bool(heterogeneous),
              "avg_degree_target": avg_degree, "rmat_abc": list(RMAT_ABC), "rmat_noise": RMAT_NOISE,
              "homophily": HOMOPHILY,
              "num_classes": int(num_classes), "feature_separation": FEATURE_SEPARATION}
    name = f"synthetic{'-hetero' if heterogeneous else ''}-{size_name}"
    with DatasetWriter(root, name, source=source, overwrite=overwrite) as w:
        for t in order:
            w.add_node_type(t, counts[t])
        w.add_edges("paper", "cites", "paper", np.concatenate((lo, hi)), np.concatenate((hi, lo)))
        del lo, hi
        home_class = {"paper": labels}
        if heterogeneous:
            _hetero_relations(w, counts, labels, num_classes, seed, home_class)
        w.add_static_scores(order, normalisation=pagerank)  # PageRank byte and degree over every relation just added
        w.set_labels("paper", labels, num_classes)
        split_perm = np.random.default_rng([seed, _S_SPLIT]).permutation(n)
        a, b = int(0.6 * n), int(0.8 * n)
        w.set_splits(np.sort(split_perm[:a]), np.sort(split_perm[a:b]), np.sort(split_perm[b:]))
        write_features(w, order, home_class, int(feature_dim), dtype, int(num_classes), int(seed), progress)
        return w.commit()


def _hetero_relations(w: DatasetWriter, counts: dict, paper_class: np.ndarray, num_classes: int, seed: int,
                      home_class: dict) -> list[tuple[str, str, str]]:
    """IGBH-like relations (written_by, topic, affiliated_to) and their reverses; fills home_class."""
    rng = np.random.default_rng([seed, _S_HETERO])
    n_paper, n_author, n_fos, n_inst = counts["paper"], counts["author"], counts["fos"], counts["institute"]
    perms = {t: rng.permutation(counts[t]) for t in ("author", "fos", "institute")}
    for t in ("author", "fos"):  # class blocks before permutation: block c = ids [c*n/C, (c+1)*n/C)
        old_class = (np.arange(counts[t], dtype=np.int64) * num_classes) // counts[t]
        home_class[t] = np.empty(counts[t], dtype=np.int64)
        home_class[t][perms[t]] = old_class
    home_class["institute"] = rng.integers(0, num_classes, n_inst)

    out = []
    p, a = _bipartite(rng, int(round(WRITTEN_BY_PER_PAPER * n_paper)), paper_class, n_author, num_classes, HOMOPHILY)
    a = perms["author"][a]
    out.append(("paper", "author", w.add_edges("paper", "written_by", "author", p, a)))
    out.append(("author", "paper", w.add_edges("author", "rev_written_by", "paper", a, p)))
    p, f = _bipartite(rng, int(round(TOPIC_PER_PAPER * n_paper)), paper_class, n_fos, num_classes, HOMOPHILY)
    f = perms["fos"][f]
    out.append(("paper", "fos", w.add_edges("paper", "topic", "fos", p, f)))
    out.append(("fos", "paper", w.add_edges("fos", "rev_topic", "paper", f, p)))
    no_class = np.zeros(n_author, dtype=np.int64)  # affiliation ignores classes: one block
    au, i = _bipartite(rng, int(round(AFFILIATED_PER_AUTHOR * n_author)), no_class, n_inst, 1, 0.0)
    i = perms["institute"][i]
    out.append(("author", "institute", w.add_edges("author", "affiliated_to", "institute", au, i)))
    out.append(("institute", "author", w.add_edges("institute", "rev_affiliated_to", "author", i, au)))
    return out
