"""Fault cases of `dataset import` of a user's graph."""

from __future__ import annotations

import os

from lsm_gnn.check.faults.base import Ctx, GOOD, Outcome, case, judge_error


# importing a user's graph
def _import_case(edges, *, extra=(), names=None, prep=None):
    def run(ctx: Ctx) -> Outcome:
        import numpy as np

        e = ctx.tmp / "edges.npy"
        np.save(e, edges)
        args = ["dataset", "import", "--edges", e, "--out", ctx.tmp / "imp", "--no-progress"]
        if prep is not None:
            args += prep(ctx)
        out = judge_error(ctx.cli(*args, *extra), names=names)
        if out.outcome in GOOD and (ctx.tmp / "imp").exists():
            return Outcome("silently wrong", f"{out.detail}; yet {ctx.tmp / 'imp'} was written")
        return out
    return run


def _edges(dtype="int64"):
    import numpy as np

    rng = np.random.default_rng(0)
    return rng.integers(0, 50, (200, 2)).astype(dtype)


def _splits(overlap: bool):
    def prep(ctx: Ctx):
        import numpy as np

        parts = {"train": np.arange(0, 20), "val": np.arange(15 if overlap else 20, 30), "test": np.arange(30, 40)}
        paths = []
        for k, v in parts.items():
            p = ctx.tmp / f"{k}.npy"
            np.save(p, v)
            paths.append(str(p))
        return ["--splits", ",".join(paths)]
    return prep


def _float_ids():
    e = _edges("float64")
    e[0, 0] = 3.5
    return e


def _neg_ids():
    e = _edges()
    e[3, 1] = -2
    return e


for _name, _what, _fn in [
    ("float-ids", "edge ids 3.5 (float)", lambda: _import_case(_float_ids(), names="edges.npy")),
    ("negative-ids", "an edge id -2", lambda: _import_case(_neg_ids(), names="edges.npy")),
    ("ids-beyond-num-nodes", "ids up to 49 with --num-nodes 10",
     lambda: _import_case(_edges(), extra=("--num-nodes", "10"), names="edges.npy")),
    ("overlapping-splits", "train and val share 5 ids", lambda: _import_case(_edges(), prep=_splits(True),
                                                                                   names="val")),
    ("one-column-edges", "edges of shape (200, 1)", lambda: _import_case(_edges()[:, :1], names="edges.npy")),
]:
    case(f"import-{_name}", f"dataset import with {_what}")(_fn())


@case("import-truncated-npy", "dataset import of an edge .npy cut in half")
def _import_trunc(ctx: Ctx) -> Outcome:
    import numpy as np

    e = ctx.tmp / "edges.npy"
    np.save(e, _edges())
    os.truncate(e, e.stat().st_size // 2)
    return judge_error(ctx.cli("dataset", "import", "--edges", e, "--out", ctx.tmp / "imp", "--no-progress"),
                       names="edges.npy")


@case("import-label-rows", "dataset import with labels for 10 of 50 nodes")
def _import_labels(ctx: Ctx) -> Outcome:
    import numpy as np

    e, lab = ctx.tmp / "edges.npy", ctx.tmp / "labels.npy"
    np.save(e, _edges())
    np.save(lab, np.zeros(10, dtype=np.int64))
    return judge_error(ctx.cli("dataset", "import", "--edges", e, "--labels", lab, "--out", ctx.tmp / "imp",
                               "--no-progress"), names="labels.npy")


# inputs whose stated size would take the machine down
@case("import-header-terabytes", "dataset import of a 66 KB edge .npy whose header states 10**12 x 2 int64")
def _import_huge_header(ctx: Ctx) -> Outcome:
    from numpy.lib import format as npf

    e = ctx.tmp / "edges.npy"
    with open(e, "wb") as fh:
        npf.write_array_header_1_0(fh, {"descr": "<i8", "fortran_order": False, "shape": (10**12, 2)})
        fh.write(b"\0" * 65_000)
    return judge_error(ctx.cli("dataset", "import", "--edges", e, "--out", ctx.tmp / "imp", "--no-progress"),
                       names="edges.npy")


@case("import-huge-node-id", "dataset import of three edges, one of them to node 10**12")
def _import_huge_id(ctx: Ctx) -> Outcome:
    import numpy as np

    return _import_case(np.array([[0, 1], [1, 2], [2, 10**12]], np.int64), names="num_nodes")(ctx)


@case("import-huge-num-nodes", "dataset import with --num-nodes 10**12")
def _import_huge_n(ctx: Ctx) -> Outcome:
    return _import_case(_edges(), extra=("--num-nodes", str(10**12)), names="num_nodes")(ctx)
