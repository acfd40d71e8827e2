"""The preparation pipeline shared by every real dataset: a `RawGraph` (memmapped raw arrays,
described by the dataset readers igb.py / ogb.py / mag.py) -> an lsm-gnn dataset directory.

Steps, each checkpointed in `<out>.prepare-state/` (state.py) so a rerun skips finished ones:
topology per relation (CSC + CSR, convert.build_compressed), labels, splits, static scores
(PageRank byte + degree), features (resumable chunk copy). The last step assembles everything
with `DatasetWriter` (whose `commit()` renames the directory into place), so `<out>` appears only
when complete; the state directory is removed afterwards.

Relations between two different node types are also stored reversed as `rev_<relation>`
(same files: the reverse's CSC is the forward's CSR), as the synthetic IGBH-like data does, so
samplers can walk in-edges into every type.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
from tqdm import tqdm

from lsm_gnn.datasets.format import check_dataset_output, CHECKSUM_FILE, FEATURE_FILE, Dataset, DatasetWriter
from lsm_gnn.datasets.real import convert
from lsm_gnn.datasets.real.npy import EdgeArray
from lsm_gnn.datasets.real.state import PrepareState, fingerprint
from lsm_gnn.utils.errors import DataError

log = logging.getLogger(__name__)


@dataclass
class Relation:
    src_type: str
    relation: str
    dst_type: str
    edges: EdgeArray

    @property
    def etype(self) -> str:
        return f"{self.src_type}__{self.relation}__{self.dst_type}"

    @property
    def reverse_etype(self) -> str | None:
        if self.src_type == self.dst_type:
            return None
        return f"{self.dst_type}__rev_{self.relation}__{self.src_type}"


@dataclass
class FeaturePart:
    ntype: str
    array: np.ndarray            # (N_t, dim), usually a memmap
    path: Path
    patches: list = field(default_factory=list)   # (first row, array) overriding rows of `array`


@dataclass
class RawGraph:
    name: str
    node_counts: dict            # every node type; featured types first, in feature-row order
    features: list               # FeaturePart per featured type, in feature-row order
    relations: list              # Relation
    label_type: str
    labels: np.ndarray
    labels_path: Path
    num_classes: int
    n_labeled: int | None        # rows at or beyond this index are unlabelled (IGB-full)
    splits: Callable             # labels (int64, -1 = none) -> {"train", "val", "test"}: int64 ids
    source: dict


def show(progress: bool) -> bool:
    return bool(progress) and sys.stderr.isatty()


def bar(total, desc, progress, unit="it"):
    return tqdm(total=total, desc=desc, unit=unit, unit_scale=True, disable=not show(progress), leave=False)


def check_split(ids: np.ndarray, path, num_nodes: int, labels: np.ndarray | None = None) -> np.ndarray:
    """Split ids as int64; DataError if any is out of range or (with labels) unlabelled."""
    ids = np.asarray(ids)
    if ids.dtype.kind == "f":
        if np.any(ids != np.floor(ids)):
            raise DataError(path, "split ids must be whole numbers")
    elif ids.dtype.kind not in "iu":
        raise DataError(path, "split ids must be integers", found=ids.dtype)
    ids = ids.astype(np.int64).ravel()
    if ids.size and (ids.min() < 0 or ids.max() >= num_nodes):
        bad = int(ids[(ids < 0) | (ids >= num_nodes)][0])
        raise DataError(path, "split id out of range", expected=f"[0, {num_nodes})", found=bad)
    if labels is not None and ids.size:
        unl = ids[np.asarray(labels[ids]) < 0]
        if unl.size:
            raise DataError(path, f"{unl.size} split nodes have no label", found=f"for example node {int(unl[0])}")
    return ids


def prepare_graph(name: str, out_dir, inputs: list[Path], read: Callable[[PrepareState], RawGraph], *,
                  progress: bool = True, overwrite: bool = False, fingerprint_extra: dict | None = None) -> Dataset:
    out = Path(out_dir)
    out = check_dataset_output(out, overwrite)  # before any work: what --force may replace
    missing = [p for p in inputs if not Path(p).is_file()]
    if missing:
        raise DataError(missing[0], "missing input file")
    state = PrepareState(out, fingerprint(name, inputs, fingerprint_extra))
    try:
        g = read(state)
        _topology(g, state, progress)
        _labels(g, state, progress)
        _splits(g, state)
        _static(g, state, progress)
        feats = _features(g, state, progress)
        ds = _commit(g, state, out, feats, overwrite)
    finally:
        state.close()
    state.remove()
    return ds


# ---- steps ---------------------------------------------------------------------------------
def _topology(g: RawGraph, state: PrepareState, progress: bool):
    for rel in g.relations:
        step = f"topology/{rel.etype}"
        if state.done(step):
            continue
        d = state.sub(step)
        ns, nd = g.node_counts[rel.src_type], g.node_counts[rel.dst_type]
        with bar(2 * 2 * rel.edges.num_edges, f"edges {rel.etype}", progress) as b:
            for kind, by, n_major, n_minor in (("csc", "dst", nd, ns), ("csr", "src", ns, nd)):
                chunks = convert.edge_chunks(rel.edges, (0, ns), (0, nd), by=by)
                convert.build_compressed(chunks, n_major, n_minor, d / f"{kind}_indptr.npy",
                                         d / f"{kind}_indices.npy", bar=b)
        state.mark(step, {"num_edges": rel.edges.num_edges})


def _labels(g: RawGraph, state: PrepareState, progress: bool):
    if state.done("labels"):
        return
    n = g.node_counts[g.label_type]
    with bar(n, "labels", progress) as b:
        labeled = convert.convert_labels(g.labels, g.labels_path, n, g.num_classes, g.n_labeled,
                                         state.sub("labels") / f"{g.label_type}.npy", bar=b)
    state.mark("labels", {"num_labeled": labeled})


def _load_labels(g: RawGraph, state: PrepareState) -> np.ndarray:
    return np.load(state.dir / "labels" / f"{g.label_type}.npy", mmap_mode="r")


def _splits(g: RawGraph, state: PrepareState):
    if state.done("splits"):
        return
    splits = g.splits(_load_labels(g, state))
    d = state.sub("splits")
    for k in ("train", "val", "test"):
        np.save(d / f"{k}.npy", np.asarray(splits[k], dtype=np.int64))
    state.mark("splits", {k: int(len(splits[k])) for k in ("train", "val", "test")})


def _type_order(g: RawGraph) -> list[str]:
    order = [p.ntype for p in g.features]
    return order + [t for t in g.node_counts if t not in order]


def _static(g: RawGraph, state: PrepareState, progress: bool):
    if state.done("static"):
        return
    from lsm_gnn.datasets import pagerank

    d = state.sub("static")
    if len(g.node_counts) == 1 and len(g.relations) == 1:
        rel = g.relations[0]
        top = state.dir / "topology" / rel.etype
        indptr = np.load(top / "csc_indptr.npy", mmap_mode="r")
        indices = np.load(top / "csc_indices.npy", mmap_mode="r")
        scores = pagerank.static_scores(dict(g.node_counts), [(rel.src_type, rel.dst_type, indptr, indices)])
    else:
        # the homogeneous view over every stored relation (reverses included), built on disk
        order = _type_order(g)
        offsets, total = {}, 0
        for t in order:
            offsets[t] = total
            total += g.node_counts[t]
        gens = []
        for rel in g.relations:
            ns, nd = g.node_counts[rel.src_type], g.node_counts[rel.dst_type]
            kw = dict(src_offset=offsets[rel.src_type], dst_offset=offsets[rel.dst_type])
            gens.append(convert.edge_chunks(rel.edges, (0, ns), (0, nd), by="dst", **kw))
            if rel.reverse_etype:
                gens.append(convert.edge_chunks(rel.edges, (0, ns), (0, nd), by="src", **kw))
        flat = state.sub("static-graph")
        n_edges = sum(r.edges.num_edges * (2 if r.reverse_etype else 1) for r in g.relations)
        with bar(2 * n_edges, "homogeneous view", progress) as b:
            convert.build_compressed(convert.chain(*gens), total, total, flat / "indptr.npy",
                                     flat / "indices.npy", bar=b)
        indptr = np.load(flat / "indptr.npy", mmap_mode="r")
        indices = np.load(flat / "indices.npy", mmap_mode="r")
        pr = pagerank.percentile_byte(pagerank.pagerank(indptr, indices))
        degree = np.diff(np.asarray(indptr))
        scores = {t: (pr[offsets[t]: offsets[t] + g.node_counts[t]],
                      degree[offsets[t]: offsets[t] + g.node_counts[t]]) for t in order}
        del indptr, indices
    for t, (pr_t, deg_t) in scores.items():
        np.save(d / f"{t}.pagerank_u8.npy", np.asarray(pr_t, dtype=np.uint8))
        np.save(d / f"{t}.degree.npy", np.asarray(deg_t, dtype=np.int64))
    shutil.rmtree(state.dir / "static-graph", ignore_errors=True)
    state.mark("static")


def _features(g: RawGraph, state: PrepareState, progress: bool) -> dict:
    if state.done("features"):
        return state.info("features")
    first = g.features[0]
    dim, dtype = first.array.shape[1], first.array.dtype
    for p in g.features:
        if p.array.ndim != 2 or p.array.shape[1] != dim or p.array.dtype != dtype:
            raise DataError(p.path, "feature arrays of all node types must share dim and dtype",
                            expected=f"(N, {dim}) {dtype}", found=f"{p.array.shape} {p.array.dtype}")
        if p.array.shape[0] != g.node_counts[p.ntype]:
            raise DataError(p.path, f"feature rows differ from the {p.ntype} node count",
                            expected=g.node_counts[p.ntype], found=p.array.shape[0])
    total = sum(p.array.shape[0] for p in g.features)
    ff = convert.FeatureFile(state.dir / FEATURE_FILE, dim, dtype, total)
    try:
        with bar(total, "features", progress, unit="row") as b:
            b.update(ff.rows)
            convert.copy_rows(ff, [(p.array, p.patches) for p in g.features], bar=b)
        meta = ff.close()
    except BaseException:
        ff.abort()
        raise
    offsets, at = {}, 0
    for p in g.features:
        offsets[p.ntype] = at
        at += p.array.shape[0]
    meta["type_offsets"] = offsets
    state.mark("features", meta)
    return meta


def _link(src: Path, dst: Path):
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)       # the state keeps its copy until the commit succeeds
    except OSError:
        shutil.copyfile(src, dst)


def _commit(g: RawGraph, state: PrepareState, out: Path, feats: dict, overwrite: bool) -> Dataset:
    with DatasetWriter(out, g.name, source=g.source, overwrite=overwrite) as w:
        for t, n in g.node_counts.items():
            w.add_node_type(t, n)
        for rel in g.relations:
            top = state.dir / "topology" / rel.etype
            pairs = [(rel.etype, rel.src_type, rel.relation, rel.dst_type, {"csc": "csc", "csr": "csr"})]
            if rel.reverse_etype:
                pairs.append((rel.reverse_etype, rel.dst_type, f"rev_{rel.relation}", rel.src_type,
                              {"csc": "csr", "csr": "csc"}))
            for etype, s, r, d, kinds in pairs:
                for ours, theirs in kinds.items():
                    for part in ("indptr", "indices"):
                        _link(top / f"{theirs}_{part}.npy", w.tmp / f"topology/{etype}/{ours}_{part}.npy")
                w.meta["edge_types"][etype] = {"src_type": s, "relation": r, "dst_type": d,
                                               "num_edges": int(rel.edges.num_edges)}
        w.set_labels(g.label_type, _load_labels(g, state), g.num_classes)
        sp = {k: np.load(state.dir / "splits" / f"{k}.npy") for k in ("train", "val", "test")}
        w.set_splits(sp["train"], sp["val"], sp["test"],
                     unlabelled_ok=("test",) if g.source.get("test_labels_hidden") else ())
        from lsm_gnn.datasets import pagerank

        w.set_static_method(pagerank.method())  # what _static computed
        for t in g.node_counts:
            w.set_static(t, np.load(state.dir / "static" / f"{t}.pagerank_u8.npy", mmap_mode="r"),
                         np.load(state.dir / "static" / f"{t}.degree.npy", mmap_mode="r"))
        _link(state.dir / FEATURE_FILE, w.tmp / FEATURE_FILE)
        if feats.get("checksums"):  # a state from before row checksums: commit computes them
            _link(state.dir / CHECKSUM_FILE, w.tmp / CHECKSUM_FILE)
        w.meta["features"] = {"file": FEATURE_FILE, **{k: v for k, v in feats.items() if k != "sha256"}}
        w._hashes[FEATURE_FILE] = feats["sha256"]  # hashed while written; saves re-reading it
        return w.commit()
