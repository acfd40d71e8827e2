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
