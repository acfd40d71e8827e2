"""Fault cases of the dataset files as training, `dataset verify` and the baselines open them."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Callable

from lsm_gnn.check.faults.base import (BASE_NODES, Ctx, ETYPE, Outcome, _flip_byte, _hub, _meta, _npy, _save_npy,
                                       _set_meta, _write_row, case, judge_error)


# dataset files, opened by training
def _train_on_damaged(damage: Callable[[Path], None], names: str | None = None, *extra: str):
    def run(ctx: Ctx) -> Outcome:
        ds = ctx.dataset()
        damage(ds)
        rec = ctx.tmp / "run.json"
        return judge_error(ctx.train(ds, rec, *extra), rec, names=names)
    return run


def _truncate(rel: str, keep: float = 0.5):
    def damage(ds: Path):
        p = ds / rel
        os.truncate(p, int(p.stat().st_size * keep))
    return damage


def _remove(rel: str):
    def damage(ds: Path):
        p = ds / rel
        shutil.rmtree(p) if p.is_dir() else p.unlink()
    return damage


def _meta_edit(fn: Callable[[dict], None]):
    def damage(ds: Path):
        m = _meta(ds)
        fn(m)
        _set_meta(ds, m)
    return damage


def _npy_edit(rel: str, fn):
    def damage(ds: Path):
        a = _npy(ds, rel).copy()
        _save_npy(ds, rel, fn(a))
    return damage


for _name, _what, _damage, _names, _cheap in [
    ("missing-metadata", "metadata.json deleted", _remove("metadata.json"), "metadata.json", True),
    ("metadata-not-json", "metadata.json cut in half", _truncate("metadata.json"), "metadata.json", True),
    ("metadata-wrong-format", "metadata.json format: 'other'", _meta_edit(lambda m: m.update(format="other")),
     "metadata.json", True),
    ("missing-features", "features.bin deleted", _remove("features.bin"), "features.bin", True),
    ("truncated-features", "features.bin cut in half", _truncate("features.bin"), "features.bin", True),
    ("features-longer", "features.bin 64 KiB longer than metadata says",
     lambda ds: open(ds / "features.bin", "ab").write(b"\0" * 65536), "features.bin", True),
    ("wrong-row-count", "metadata features.num_rows one more than the graph",
     _meta_edit(lambda m: m["features"].update(num_rows=m["features"]["num_rows"] + 1)), "num_rows", True),
    ("int32-dtype", "metadata features.dtype 'int32' (the bytes are float32)",
     _meta_edit(lambda m: m["features"].update(dtype="int32")), "dtype", False),
    ("unknown-dtype", "metadata features.dtype 'float13'", _meta_edit(lambda m: m["features"].update(dtype="float13")),
     "dtype", True),
    ("wrong-dim", "metadata features.dim doubled (row_bytes kept)",
     _meta_edit(lambda m: m["features"].update(dim=m["features"]["dim"] * 2)), "dim", True),
    ("missing-csc", "the CSC indices file deleted", _remove(f"topology/{ETYPE}/csc_indices.npy"), "csc_indices",
     True),
    ("truncated-csc", "the CSC indices .npy cut in half", _truncate(f"topology/{ETYPE}/csc_indices.npy"),
     "csc_indices", True),
    ("non-monotonic-indptr", "csc_indptr with two offsets swapped (non-monotonic)",
     _npy_edit(f"topology/{ETYPE}/csc_indptr.npy", lambda a: (a.__setitem__(slice(10, 12), a[10:12][::-1] + [50, -50]), a)[1]),
     "csc_indptr", False),
    ("csc-index-out-of-range", "a CSC neighbour id = 10 x the node count",
     _npy_edit(f"topology/{ETYPE}/csc_indices.npy", lambda a: (a.__setitem__(5, 10 * BASE_NODES), a)[1]),
     "csc_indices", False),
    ("float-indices", "CSC indices stored as float64", _npy_edit(f"topology/{ETYPE}/csc_indices.npy",
                                                                 lambda a: a.astype("float64")),
     "csc_indices", True),
    ("missing-labels", "labels/paper.npy deleted", _remove("labels/paper.npy"), "labels", True),
    ("labels-short", "labels/paper.npy with 10 rows missing", _npy_edit("labels/paper.npy", lambda a: a[:-10]),
     "labels", True),
    ("label-out-of-range", "a label = num_classes + 5", _npy_edit("labels/paper.npy",
                                                                   lambda a: (a.__setitem__(0, 24), a)[1]),
     "labels", False),
    ("split-out-of-range", "a train split id = node count + 7",
     _npy_edit("splits/train.npy", lambda a: (a.__setitem__(0, BASE_NODES + 7), a)[1]), "train", True),
    ("missing-split", "splits/val.npy deleted", _remove("splits/val.npy"), "val", True),
    ("truncated-pagerank", "the PageRank bytes file cut in half", _truncate("static/paper.pagerank_u8.npy"),
     "pagerank", True),
]:
    case(f"dataset-{_name}", f"{_what}; train", cheap=_cheap, timeout_s=60 if _cheap else 120)(_train_on_damaged(_damage, _names))


@case("features-bit-flip", "one bit flipped in a hub's row of features.bin; train", cheap=False, timeout_s=120)
def _bit_flip(ctx: Ctx) -> Outcome:
    ds = ctx.dataset()
    row = _hub(ds)
    stride = _meta(ds)["features"]["row_stride"]
    _flip_byte(ds / "features.bin", row * stride + 3)  # the exponent byte of the row's first value
    rec = ctx.tmp / "run.json"
    return judge_error(ctx.train(ds, rec), rec, names="features.bin")


@case("features-bit-flip-verify-quick", "one bit flipped in features.bin; dataset verify --quick")
def _bit_flip_quick(ctx: Ctx) -> Outcome:
    ds = ctx.dataset()
    _flip_byte(ds / "features.bin", 100)
    return judge_error(ctx.cli("dataset", "verify", ds, "--quick", "--no-progress"), names="features.bin")


@case("features-bit-flip-verify", "one bit flipped in features.bin; dataset verify (full)")
def _bit_flip_full(ctx: Ctx) -> Outcome:
    ds = ctx.dataset()
    _flip_byte(ds / "features.bin", 100)
    return judge_error(ctx.cli("dataset", "verify", ds, "--no-progress"), names="features.bin")


def _train_with_row_of(value: float):
    """A hub's row set to `value` in every column (NaN, inf), then training: the row must be named."""
    def run(ctx: Ctx) -> Outcome:
        ds = ctx.dataset()
        _write_row(ds, _hub(ds), value)
        rec = ctx.tmp / "run.json"
        return judge_error(ctx.train(ds, rec), rec, names="row")
    return run


case("features-nan-row", "NaN in every value of a hub's row; train", cheap=False,
     timeout_s=120)(_train_with_row_of(float("nan")))
case("features-inf-row", "+inf in a hub's row; train", cheap=False, timeout_s=120)(_train_with_row_of(float("inf")))


@case("metadata-not-hashed", "metadata.json features.dtype int32 (bytes are float32); dataset verify (full)")
def _verify_meta(ctx: Ctx) -> Outcome:
    ds = ctx.dataset()
    _meta_edit(lambda m: m["features"].update(dtype="int32"))(ds)
    return judge_error(ctx.cli("dataset", "verify", ds, "--no-progress"), names="dtype")


@case("dataset-path-missing", "--dataset names a folder that does not exist; train")
def _no_dataset(ctx: Ctx) -> Outcome:
    rec = ctx.tmp / "run.json"
    return judge_error(ctx.train(ctx.tmp / "nowhere", rec), rec, names="nowhere")


@case("dataset-path-is-file", "--dataset names a file; train")
def _dataset_file(ctx: Ctx) -> Outcome:
    f = ctx.tmp / "file"
    f.write_text("x")
    rec = ctx.tmp / "run.json"
    return judge_error(ctx.train(f, rec), rec, names="file")


@case("baseline-missing-dataset", "lsm-gnn run --system mmap on a folder that does not exist")
def _baseline_no_dataset(ctx: Ctx) -> Outcome:
    rec = ctx.tmp / "run.json"
    return judge_error(ctx.cli("run", "--system", "mmap", "--dataset", ctx.tmp / "nowhere", "--record", rec,
                               "--no-progress"), rec, names="nowhere")


@case("baseline-record-readonly", "lsm-gnn run --system memory with --record in a read-only folder")
def _baseline_ro(ctx: Ctx) -> Outcome:
    from lsm_gnn.check.sandbox import readonly_dir

    ctx.note(readonly_dir(ctx.tmp / "ro"))
    return judge_error(ctx.cli("run", "--system", "memory", "--dataset", ctx.dataset(), "--record",
                               ctx.tmp / "ro" / "run.json", "--no-progress"), names="ro")


# consistent but foreign data; numbers of the metadata outside their type
def _foreign(files: tuple[str, ...]):
    def run(ctx: Ctx) -> Outcome:
        other = ctx.tmp / "other"
        made = ctx.cli("dataset", "generate", str(BASE_NODES), "--dim", "16", "--seed", "7", "--out", other,
                       "--no-progress")
        if made.error is not None:
            return Outcome("traceback", f"could not make the other dataset: {made.error}")
        ds = ctx.dataset()
        for f in files:
            shutil.copyfile(other / f, ds / f)
        rec = ctx.tmp / "run.json"
        return judge_error(ctx.train(ds, rec), rec, names=files[-1])
    return run


case("dataset-foreign-features-and-checksums",
     "features.bin and features.xxh3.npy swapped in together from another dataset of the same shape; train")(
    _foreign(("features.bin", "features.xxh3.npy")))
case("dataset-foreign-features", "features.bin swapped in from another dataset of the same shape; train")(
    _foreign(("features.bin",)))


for _field, _value in (("num_rows", "1e400"), ("dim", "16.5")):
    def _meta_number(ctx: Ctx, _field=_field, _value=_value) -> Outcome:
        ds = ctx.dataset()
        text = (ds / "metadata.json").read_text()
        old = _meta(ds)["features"][_field]
        (ds / "metadata.json").write_text(text.replace(f'"{_field}": {old}', f'"{_field}": {_value}', 1))
        rec = ctx.tmp / "run.json"
        return judge_error(ctx.train(ds, rec), rec, names=_field)
    case(f"metadata-{_field.replace('_', '-')}-{'overflow' if 'e' in _value else 'fraction'}",
         f"metadata.json features.{_field}: {_value}; train")(_meta_number)
