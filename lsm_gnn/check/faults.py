"""`lsm-gnn check faults`: inject each fault into a temporary copy of a tiny synthetic graph and
count how every run ended.

Each case (the `CASES` table, docs/faults.md lists them all) does one thing a user or the machine
can do wrong -- a flipped byte in features.bin, a full disk while generating, two runs on one
record, a killed launcher -- runs the `lsm-gnn` command it hurts, and is classified:

  clear error      the command stopped with an error naming what was wrong (an LsmGnnError or a
                   usage error), nothing half-written left behind;
  failed record    the same, and the run's record says `status: failed`;
  recovered        the command did what was asked and said how it dealt with the fault (a clamp it
                   states, leftovers it named and removed, ranks that ended with their launcher);
  silently wrong   the command succeeded as if nothing had happened (a trained model from a flipped
                   byte, two runs on one record both "complete");
  hang             the case outlived its time limit (killed, with everything it started);
  traceback        any other exception: a bug's traceback where a named error was due.

Cases run one after another, each in a process forked from this one (the slow imports are paid
once; the parent never runs the libraries' thread pools, so a fork is safe) and in its own process
group, so that a hang is killed with everything it spawned. `--cheap` keeps the cases that train
nothing and spawn no ranks (what CI runs: `pytest -m faults`). Real faults where the kernel allows
them: a tmpfs of a few KB in a private mount namespace for a full disk, a read-only tmpfs, SIGKILL
and SIGSTOP of real processes, a loopback HTTP server (lsm_gnn.check.sandbox).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

OUTCOMES = ("clear error", "failed record", "recovered", "silently wrong", "hang", "traceback")
GOOD = ("clear error", "failed record", "recovered")
BASE_NODES, BASE_DIM = 2000, 16
ETYPE = "paper__cites__paper"


# ---- what a case sees ------------------------------------------------------------------------------
@dataclass
class Ran:
    """How one command ended: `error` is None when it succeeded."""
    error: BaseException | None = None
    kind: str = "ok"            # ok | clear | traceback | exit
    code: int = 0
    output: str = ""


class Ctx:
    """A case's temporary folder, the pristine tiny graph and the ways to run `lsm-gnn` in it."""

    def __init__(self, tmp: Path, base: Path):
        self.tmp, self.base = tmp, base
        self.notes: list[str] = []

    def dataset(self, name: str = "ds") -> Path:
        """A fresh copy of the tiny graph to damage."""
        dst = self.tmp / name
        shutil.copytree(self.base, dst)
        return dst

    def note(self, text: str) -> None:
        self.notes.append(text)

    def cli(self, *args: str) -> Ran:
        """`lsm-gnn ARGS` in this process, with the console script's error handling
        (lsm_gnn.cli.main, reported_error): what it reports as `error: ...` or a usage error is a
        clear error, anything else a traceback."""
        import click

        from lsm_gnn.cli import cli, reported_error

        out = io.StringIO()
        ran = Ran()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            try:
                cli.main([str(a) for a in args], prog_name="lsm-gnn", standalone_mode=False)
            except click.exceptions.ClickException as e:
                ran.error, ran.kind, ran.code = e, "clear", e.exit_code
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
                if code:
                    ran.error, ran.kind, ran.code = e, "exit", code
            except Exception as e:  # noqa: BLE001 - what the suite is here to count
                if reported_error(e) is not None:
                    ran.error, ran.kind, ran.code = e, "clear", 2
                else:
                    ran.error, ran.kind, ran.code = e, "traceback", 1
                    traceback.print_exc(file=out)
        ran.output = out.getvalue()
        return ran

    def train(self, ds: Path, record: Path | None = None, *extra: str) -> Ran:
        """One tiny epoch of `lsm-gnn train` (LSM-GNN's cache over O_DIRECT reads) on `ds`."""
        args = ["train", "--config", "lsm", "--dataset", ds, "--epochs", "1", "--batch-size", "256",
                "--fanouts", "4,4", "--threads", "1", "--quiet", "--set", "model.hidden=16"]
        args += ["--record", record or self.tmp / "run.json"]
        return self.cli(*args, *extra)


@dataclass
class Outcome:
    outcome: str
    detail: str


def judge_error(ran: Ran, record: Path | None = None, *, names: str | None = None) -> Outcome:
    """The outcome of a command that should have refused the fault: a clear error (a failed record
    if `record` says so), a traceback, or silently wrong when it succeeded."""
    if ran.error is None:
        return Outcome("silently wrong", "the command succeeded")
    lines = ran.output.strip().splitlines()
    msg = _first_line(ran.error) or (lines[-1][:300] if lines else "")
    if ran.kind == "traceback":
        return Outcome("traceback", f"{type(ran.error).__name__}: {msg}")
    detail = f"{type(ran.error).__name__}: {msg}"
    if names is not None and names not in str(ran.error) + ran.output:
        detail += f" [does not name {names}]"
    if record is not None and record.exists():
        try:
            rec = json.loads(record.read_text())
        except (OSError, json.JSONDecodeError):
            return Outcome("silently wrong", f"{detail}; the record {record.name} is not JSON")
        if rec.get("status") == "failed":
            return Outcome("failed record", detail)
        return Outcome("silently wrong", f"{detail}; yet the record says {rec.get('status')}")
    return Outcome("clear error", detail)


def judge_run(ran: Ran, ok: Callable[[], str | None]) -> Outcome:
    """The outcome of a command that may go on: `ok()` returns how it recovered (None: it did not)."""
    if ran.error is not None:
        return judge_error(ran)
    how = ok()
    return Outcome("recovered", how) if how else Outcome("silently wrong", "succeeded without saying anything")


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0][:300] if text else ""


def _record_status(path: Path) -> str | None:
    try:
        return json.loads(path.read_text()).get("status")
    except (OSError, json.JSONDecodeError):
        return None


# ---- damage helpers --------------------------------------------------------------------------------
def _npy(ds: Path, rel: str):
    import numpy as np

    return np.load(ds / rel)


def _save_npy(ds: Path, rel: str, arr) -> None:
    import numpy as np

    with open(ds / rel, "wb") as f:
        np.save(f, arr)


def _meta(ds: Path) -> dict:
    return json.loads((ds / "metadata.json").read_text())


def _set_meta(ds: Path, meta: dict) -> None:
    (ds / "metadata.json").write_text(json.dumps(meta, indent=2))


def _flip_byte(path: Path, offset: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0x40]))


def _hub(ds: Path) -> int:
    import numpy as np

    indptr = _npy(ds, f"topology/{ETYPE}/csr_indptr.npy")
    return int(np.argmax(np.diff(indptr)))


def _write_row(ds: Path, row: int, value: float) -> None:
    import numpy as np

    m = _meta(ds)["features"]
    with open(ds / "features.bin", "r+b") as f:
        f.seek(row * m["row_stride"])
        f.write(np.full(m["dim"], value, dtype=m["dtype"]).tobytes())


def _spawn_cli(args: list, **kw) -> subprocess.Popen:
    """`python -m lsm_gnn.cli ARGS` as a real process (for what must be killed from outside)."""
    env = dict(os.environ, DGLBACKEND="pytorch")
    return subprocess.Popen([sys.executable, "-m", "lsm_gnn.cli", *map(str, args)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)


def _wait_for(pred: Callable[[], bool], timeout: float, poll: float = 0.1) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(poll)
    return pred()


def _lock_held(path: Path) -> bool:
    from filelock import FileLock, Timeout

    from lsm_gnn.utils.locks import lock_file

    lf = lock_file(path)
    if not lf.exists():
        return False
    try:
        FileLock(lf, timeout=0).acquire().lock.release()
        return False
    except Timeout:
        return True


# ---- the cases -------------------------------------------------------------------------------------
@dataclass
class Case:
    name: str
    what: str
    run: Callable[[Ctx], Outcome]
    cheap: bool = True
    timeout_s: float = 60.0


CASES: list[Case] = []


def case(name: str, what: str, *, cheap: bool = True, timeout_s: float = 60.0):
    def deco(fn):
        CASES.append(Case(name, what, fn, cheap, timeout_s))
        return fn
    return deco


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


# configuration
@case("window-1000", "--window 1000 on an epoch of a few iterations; train", cheap=False, timeout_s=120)
def _window(ctx: Ctx) -> Outcome:
    ds = ctx.dataset()
    rec = ctx.tmp / "run.json"
    ran = ctx.train(ds, rec, "--window", "1000")

    def stated():
        text = ran.output.lower() + (rec.read_text().lower() if rec.exists() else "")
        return "window clamped" if "clamp" in text else None
    return judge_run(ran, stated)


for _name, _what, _args in [
    ("unknown-config-key", "--set cache.bogus=1", ["--set", "cache.bogus=1"]),
    ("wrong-config-type", "--set train.lr=fast", ["--set", "train.lr=fast"]),
    ("negative-batch", "--batch-size -4", ["--batch-size", "-4"]),
    ("zero-fanout", "--fanouts 0,4", ["--fanouts", "0,4"]),
    ("unknown-policy", "--policy clairvoyant", ["--policy", "clairvoyant"]),
    ("unknown-model", "--model transformer9", ["--model", "transformer9"]),
    ("negative-cache-fraction", "--cache-fraction -0.5", ["--cache-fraction", "-0.5"]),
    ("warmup-longer-than-epoch", "--warmup 500 --timed 1", ["--warmup", "500", "--timed", "1"]),
]:
    def _cfg_case(ctx: Ctx, _args=_args) -> Outcome:
        rec = ctx.tmp / "run.json"
        return judge_error(ctx.train(ctx.dataset(), rec, *_args), rec)
    case(f"config-{_name}", f"{_what}; train")(_cfg_case)


@case("config-file-not-yaml", "--config names a file of unbalanced brackets; train")
def _bad_yaml(ctx: Ctx) -> Outcome:
    f = ctx.tmp / "c.yaml"
    f.write_text("cache: [1, 2\ntrain: {")
    return judge_error(ctx.cli("train", "--config", f, "--dataset", ctx.dataset(), "--record", ctx.tmp / "r.json"),
                       names="c.yaml")


@case("config-file-missing", "--config names no file; train")
def _no_yaml(ctx: Ctx) -> Outcome:
    return judge_error(ctx.cli("train", "--config", ctx.tmp / "none.yaml", "--dataset", ctx.dataset()),
                       names="none.yaml")


# outputs: records, full and read-only file systems, locks, leftovers
@case("record-dir-readonly", "--record in a read-only folder; train (checked before the run)")
def _record_ro(ctx: Ctx) -> Outcome:
    from lsm_gnn.check.sandbox import readonly_dir

    ds = ctx.dataset()
    ctx.note(readonly_dir(ctx.tmp / "ro"))
    t0 = time.monotonic()
    ran = ctx.train(ds, ctx.tmp / "ro" / "run.json")
    out = judge_error(ran, names="ro")
    out.detail += f" after {time.monotonic() - t0:.1f} s"
    return out


@case("record-path-is-folder", "--record names an existing folder; train")
def _record_dir(ctx: Ctx) -> Outcome:
    (ctx.tmp / "recdir").mkdir()
    return judge_error(ctx.train(ctx.dataset(), ctx.tmp / "recdir"), names="recdir")


@case("record-parent-is-file", "--record under a path whose folder is a file; train")
def _record_parent_file(ctx: Ctx) -> Outcome:
    (ctx.tmp / "afile").write_text("x")
    return judge_error(ctx.train(ctx.dataset(), ctx.tmp / "afile" / "run.json"), names="afile")


@case("record-disk-full", "--record on a full file system; train (checked before the run)")
def _record_full(ctx: Ctx) -> Outcome:
    from lsm_gnn.check.sandbox import full_dir

    ds = ctx.dataset()
    ctx.note(full_dir(ctx.tmp / "full", 4096))
    (ctx.tmp / "full" / "filler").write_bytes(b"\0" * 4096) if "tmpfs" in ctx.notes[-1] else None
    return judge_error(ctx.train(ds, ctx.tmp / "full" / "run.json"), names="full")


@case("two-runs-one-record", "a second train on the record path of one still running", cheap=False, timeout_s=180)
def _two_runs(ctx: Ctx) -> Outcome:
    ds = ctx.dataset()
    rec = ctx.tmp / "shared.json"
    first = _spawn_cli(["train", "--config", "memory", "--dataset", ds, "--epochs", "200", "--batch-size", "64",
                        "--fanouts", "4,4", "--threads", "1", "--quiet", "--record", rec])
    try:
        if not _wait_for(lambda: _lock_held(rec) or first.poll() is not None, 120):
            return Outcome("hang", "the first run never started")
        if first.poll() is not None:  # without a lock there is nothing to wait for: it ran to the end
            ctx.note("the first run did not hold a lock")
        ran = ctx.train(ds, rec)
        return judge_error(ran, names="shared.json")
    finally:
        first.kill()
        first.wait()


@case("two-generates-one-dir", "a second dataset generate into the folder one is generating")
def _two_generates(ctx: Ctx) -> Outcome:
    from lsm_gnn.utils.locks import exclusive

    out = ctx.tmp / "gen"
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the first writer: holds the directory as `dataset generate` does while it writes
        try:
            with exclusive(out, "dataset directory"):
                os.write(w, b"x")
                time.sleep(30)
        finally:
            os._exit(0)
    try:
        os.read(r, 1)
        return judge_error(ctx.cli("dataset", "generate", "500", "--dim", "8", "--out", out, "--no-progress"),
                           names="gen")
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


@case("generate-disk-full", "dataset generate onto a file system that fills up after the features")
def _gen_full(ctx: Ctx) -> Outcome:
    from lsm_gnn.check.sandbox import full_dir

    ctx.note(full_dir(ctx.tmp / "full", 200 * 1024, file_limit=64 * 1024))
    ran = ctx.cli("dataset", "generate", str(BASE_NODES), "--dim", str(BASE_DIM), "--out", ctx.tmp / "full" / "g",
                  "--no-progress")
    out = judge_error(ran, names="full")
    left = list((ctx.tmp / "full").iterdir()) if (ctx.tmp / "full").exists() else []
    if out.outcome in GOOD and left:
        return Outcome("silently wrong", f"{out.detail}; left behind: {[p.name for p in left]}")
    return out


@case("generate-readonly", "dataset generate into a read-only folder")
def _gen_ro(ctx: Ctx) -> Outcome:
    from lsm_gnn.check.sandbox import readonly_dir

    ctx.note(readonly_dir(ctx.tmp / "ro"))
    return judge_error(ctx.cli("dataset", "generate", "500", "--dim", "8", "--out", ctx.tmp / "ro" / "g",
                               "--no-progress"), names="ro")


@case("generate-exists", "dataset generate onto an existing dataset without --force")
def _gen_exists(ctx: Ctx) -> Outcome:
    ds = ctx.dataset()
    before = (ds / "metadata.json").read_bytes()
    out = judge_error(ctx.cli("dataset", "generate", "500", "--dim", "8", "--out", ds, "--no-progress"), names="ds")
    if (ds / "metadata.json").read_bytes() != before:
        return Outcome("silently wrong", "the existing dataset was replaced")
    return out


@case("generate-killed-leftovers", "SIGKILL of dataset generate while it writes, then the same command again")
def _gen_killed(ctx: Ctx) -> Outcome:
    out = ctx.tmp / "g"
    args = ["dataset", "generate", "3000", "--dim", "16", "--out", out, "--no-progress"]
    pid = os.fork()
    if pid == 0:
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
            os.dup2(1, 2)
            ctx.cli(*args)
        finally:
            os._exit(0)
    partial = lambda: list(ctx.tmp.glob(".g.*.partial"))  # noqa: E731 - the writer's folder, made first
    found = _wait_for(lambda: bool(partial()), 60, 0.01)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    if not found:
        return Outcome("hang", "the generator never started writing")
    left = partial()
    ran = ctx.cli(*args)

    def removed():
        gone = not any(p.exists() for p in left)
        named = all(str(p) in ran.output for p in left)
        return f"named and removed {len(left)} leftover(s)" if gone and named and (out / "metadata.json").exists() \
            else None
    return judge_run(ran, removed)


def _saved_trace(ctx: Ctx):
    """A 3-iteration trace of the case's dataset: (dataset, trace path, None) or an Outcome when the
    trace could not be made."""
    ds = ctx.dataset()
    tr = ctx.tmp / "t.npz"
    made = ctx.cli("simulate", ds, "--trace-only", "--save-trace", tr, "--max-batches", "3", "--batch-size", "64",
                   "--fanouts", "4,4")
    if made.error is not None:
        return ds, tr, Outcome("traceback", f"could not make the trace: {_first_line(made.error)}")
    return ds, tr, None


@case("trace-truncated", "a saved trace cut in half; simulate --trace", cheap=False, timeout_s=120)
def _trace_trunc(ctx: Ctx) -> Outcome:
    ds, tr, failed = _saved_trace(ctx)
    if failed is not None:
        return failed
    os.truncate(tr, tr.stat().st_size // 2)
    return judge_error(ctx.cli("simulate", ds, "--trace", tr, "--policy", "hybrid"), names="t.npz")


@case("trace-not-a-trace", "simulate --trace of a text file")
def _trace_text(ctx: Ctx) -> Outcome:
    tr = ctx.tmp / "t.npz"
    tr.write_text("not a trace")
    return judge_error(ctx.cli("simulate", ctx.dataset(), "--trace", tr, "--policy", "hybrid"), names="t.npz")


@case("trace-bad-offsets", "a trace whose offsets run backwards; simulate --trace", cheap=False, timeout_s=120)
def _trace_offsets(ctx: Ctx) -> Outcome:
    import numpy as np

    ds, tr, failed = _saved_trace(ctx)
    if failed is not None:
        return failed
    z = dict(np.load(tr))
    off = z["offsets"].copy()
    off[1], off[2] = off[2], off[1]
    z["offsets"] = off
    with open(tr, "wb") as f:
        np.savez(f, **z)
    return judge_error(ctx.cli("simulate", ds, "--trace", tr, "--policy", "hybrid"), names="t.npz")


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


# downloads (a loopback server; an unresolvable name)
@case("download-unresolvable-host", "dataset download from http://nonexistent.invalid", timeout_s=30)
def _dl_dns(ctx: Ctx) -> Outcome:
    t0 = time.monotonic()
    out = judge_error(ctx.cli("dataset", "download", "igb", "--size", "tiny", "--dest", ctx.tmp / "raw",
                              "--base-url", "http://nonexistent.invalid/x", "--no-progress"), names="nonexistent")
    secs = time.monotonic() - t0
    out.detail += f" after {secs:.1f} s"
    if out.outcome in GOOD and secs > 15:
        return Outcome("hang", out.detail)
    return out


@contextlib.contextmanager
def _server(handler_fn):
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class H(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            handler_fn(self)

        def log_message(self, *a):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()


@case("download-server-errors", "dataset download from a loopback server that answers 503 to every request"
      , timeout_s=60)
def _dl_retry(ctx: Ctx) -> Outcome:
    import lsm_gnn.datasets.real.http as http

    http.BACKOFF_S = 0.005
    calls = []

    def answer(h):
        calls.append(1)
        h.send_response(503)
        h.send_header("Content-Length", "0")
        h.end_headers()

    with _server(answer) as url:
        ran = ctx.cli("dataset", "download", "igb", "--size", "tiny", "--dest", ctx.tmp / "raw",
                      "--base-url", url, "--no-progress")
    retries = ran.output.count("retry")
    out = judge_error(ran)
    out.detail += f"; {len(calls)} requests, {retries} retries printed"
    if out.outcome in GOOD and retries < len(calls) - 1:
        return Outcome("silently wrong", out.detail + " (retries not all printed)")
    return out


@case("download-404", "dataset download of a file the loopback server does not have", timeout_s=60)
def _dl_404(ctx: Ctx) -> Outcome:
    def answer(h):
        h.send_response(404)
        h.send_header("Content-Length", "0")
        h.end_headers()

    with _server(answer) as url:
        return judge_error(ctx.cli("dataset", "download", "igb", "--size", "tiny", "--dest", ctx.tmp / "raw",
                                   "--base-url", url, "--no-progress"), names="404")


@case("download-disk-full", "dataset download onto a full file system from a loopback server", timeout_s=60)
def _dl_full(ctx: Ctx) -> Outcome:
    from lsm_gnn.check.sandbox import full_dir

    ctx.note(full_dir(ctx.tmp / "full", 64 * 1024))
    body = b"\0" * (1 << 20)

    def answer(h):  # no Content-Length: the body runs until the connection closes
        h.send_response(200)
        h.end_headers()
        with contextlib.suppress(OSError):
            h.wfile.write(body)

    with _server(answer) as url:
        return judge_error(ctx.cli("dataset", "download", "igb", "--size", "tiny", "--dest", ctx.tmp / "full" / "raw",
                                   "--base-url", url, "--no-progress"), names="full")


# several ranks: a killed launcher, a killed, stopped or failing rank
def _multi(ctx: Ctx, ds: Path, rec: Path, *extra: str) -> list:
    return ["train", "--config", "lsm", "--dataset", ds, "--devices", "2", "--epochs", "50", "--batch-size", "64",
            "--fanouts", "4,4", "--threads", "1", "--quiet", "--set", "model.hidden=16",
            "--set", "distributed.timeout_s=30", "--record", rec, *extra]


def _rank_pids(pid: int) -> list[int]:
    import psutil

    try:
        # sorted: the launcher starts rank 0 first, so the later pid is rank 1
        return sorted(c.pid for c in psutil.Process(pid).children(recursive=True)
                      if "spawn_main" in " ".join(c.cmdline()))
    except psutil.Error:
        return []


def _training(pid: int) -> list[int]:
    """The ranks under `pid` that have their owner file open (their feature source is up)."""
    import psutil

    out = []
    for r in _rank_pids(pid):
        with contextlib.suppress(psutil.Error):
            if any("owner-" in f.path for f in psutil.Process(r).open_files()):
                out.append(r)
    return out


@case("killed-launcher", "SIGKILL of `lsm-gnn train --devices 2` while its ranks train", cheap=False,
      timeout_s=240)
def _killed_launcher(ctx: Ctx) -> Outcome:
    import psutil

    ds = ctx.dataset()
    launcher = _spawn_cli(_multi(ctx, ds, ctx.tmp / "run.json"))
    try:
        # killed once both ranks read their owner files: past their start-up, into training
        if not _wait_for(lambda: len(_training(launcher.pid)) >= 2 or launcher.poll() is not None, 200, 0.2):
            return Outcome("hang", "the ranks never started training")
        ranks = _rank_pids(launcher.pid)
        launcher.kill()
        launcher.wait()
        t0 = time.monotonic()
        alive = lambda: [p for p in ranks if psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"]  # noqa
        _wait_for(lambda: not alive(), 30, 0.2)
        left = alive()
        for p in left:
            with contextlib.suppress(psutil.Error):
                psutil.Process(p).kill()
        if left:
            return Outcome("hang", f"ranks {left} still running 30 s after their launcher was killed")
        return Outcome("recovered", f"both ranks ended {time.monotonic() - t0:.1f} s after the launcher's SIGKILL")
    finally:
        if launcher.poll() is None:
            launcher.kill()


def _rank_fault(kind: str):
    def run(ctx: Ctx) -> Outcome:
        ds = ctx.dataset()
        rec = ctx.tmp / "run.json"
        os.environ["LSM_GNN_FAULT"] = f"rank=1,iter=2,kind={kind}"
        return judge_error(ctx.cli(*_multi(ctx, ds, rec)), rec, names="rank 1")
    return run


for _kind, _what in [("kill", "SIGKILL of rank 1 at its third fetch"),
                     ("hang", "rank 1 stops answering at its third fetch"),
                     ("raise", "rank 1 raises at its third fetch")]:
    case(f"rank-{_kind}", f"{_what} (LSM_GNN_FAULT); train --devices 2", cheap=False, timeout_s=240)(_rank_fault(_kind))


@case("rank-sigstop", "SIGSTOP of rank 1 of `lsm-gnn train --devices 2` from outside", cheap=False, timeout_s=240)
def _rank_stop(ctx: Ctx) -> Outcome:
    ds = ctx.dataset()
    rec = ctx.tmp / "run.json"
    launcher = _spawn_cli(_multi(ctx, ds, rec))
    try:
        if not _wait_for(lambda: len(_training(launcher.pid)) >= 2 or launcher.poll() is not None, 200, 0.2):
            return Outcome("hang", "the ranks never started training")
        ranks = _rank_pids(launcher.pid)
        os.kill(ranks[-1], signal.SIGSTOP)
        try:
            rc = launcher.wait(timeout=120)
        except subprocess.TimeoutExpired:
            return Outcome("hang", "the launcher did not end 120 s after a rank was stopped")
        status = _record_status(rec)
        if rc != 0 and status == "failed":
            failure = json.loads(rec.read_text())["failure"]
            return Outcome("failed record", f"exit status {rc}, record failed: rank {failure['rank']}: "
                           f"{failure['message'][:200]}" + ("" if failure["rank"] == 1 else " [not rank 1]"))
        if rc != 0:
            return Outcome("clear error", f"exit status {rc}, no record")
        return Outcome("silently wrong", "the run ended with status 0")
    finally:
        for p in _rank_pids(launcher.pid):
            with contextlib.suppress(OSError):
                os.kill(p, signal.SIGKILL)
        if launcher.poll() is None:
            launcher.kill()


# ---- the runner ------------------------------------------------------------------------------------
def select(cheap_only: bool = False, names: list[str] | None = None) -> list[Case]:
    out = [c for c in CASES if (c.cheap or not cheap_only) and (not names or any(n in c.name for n in names))]
    return out


def make_base(root: Path) -> Path:
    """The pristine tiny graph, generated in a child process (the parent stays fork-safe)."""
    base = root / "base"
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            from lsm_gnn.datasets.synthetic import generate

            generate(base, BASE_NODES, feature_dim=BASE_DIM, progress=False)
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"could not generate the tiny graph under {root}")
    return base


def run_case(c: Case, root: Path, base: Path) -> dict:
    """Run one case in a forked child (own process group) with its time limit."""
    tmp = Path(tempfile.mkdtemp(prefix=f"{c.name}-", dir=root))
    r, w = os.pipe()
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the case
        os.close(r)
        code = 0
        try:
            os.setpgid(0, 0)
            os.environ["LSM_GNN_LOCK_DIR"] = str(root / "locks")
            log = os.open(tmp / "case.log", os.O_WRONLY | os.O_CREAT, 0o644)
            os.dup2(log, 1)
            os.dup2(log, 2)
            os.chdir(tmp)
            ctx = Ctx(tmp, base)
            try:
                res = c.run(ctx)
                out = {"outcome": res.outcome, "detail": res.detail, "notes": ctx.notes}
            except Exception as e:  # noqa: BLE001 - the case's own bug counts as a traceback
                out = {"outcome": "traceback", "detail": f"in the case: {type(e).__name__}: {_first_line(e)}",
                       "notes": ctx.notes}
                traceback.print_exc()
            os.write(w, json.dumps(out).encode())
        except BaseException:  # noqa: BLE001
            code = 1
        finally:
            os._exit(code)
    os.close(w)
    chunks, deadline = [], t0 + c.timeout_s
    import select as sel

    done = False
    while time.monotonic() < deadline:
        ready, _, _ = sel.select([r], [], [], max(0.0, min(1.0, deadline - time.monotonic())))
        if ready:
            chunk = os.read(r, 65536)
            if not chunk:
                done = True
                break
            chunks.append(chunk)
    os.close(r)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)  # whatever the case left running
    _, status = os.waitpid(pid, 0)
    secs = time.monotonic() - t0
    if not done:
        res = {"outcome": "hang", "detail": f"no end within {c.timeout_s:g} s", "notes": []}
    elif not chunks:
        code = os.waitstatus_to_exitcode(status)
        how = f"signal {-code} ({signal.Signals(-code).name})" if code < 0 else f"exit status {code}"
        res = {"outcome": "traceback", "detail": f"the command crashed: {how}", "notes": []}
    else:
        res = json.loads(b"".join(chunks))
    res.update({"name": c.name, "what": c.what, "seconds": round(secs, 2), "cheap": c.cheap})
    _cleanup(tmp)
    return res


def _cleanup(tmp: Path) -> None:
    for p in tmp.rglob("*"):
        with contextlib.suppress(OSError):
            if p.is_dir():
                os.chmod(p, 0o755)
    shutil.rmtree(tmp, ignore_errors=True)


def run_suite(cases: list[Case], *, workdir: str | os.PathLike | None = None, say=print) -> dict:
    """Run `cases` and return {"cases": [...], "totals": {outcome: n}, "seconds": s}."""
    import lsm_gnn.cli  # noqa: F401 - the slow imports, paid once before forking
    import lsm_gnn.cli.dataset, lsm_gnn.cli.simulate, lsm_gnn.cli.train  # noqa: F401, E401
    import lsm_gnn.datasets.importer, lsm_gnn.datasets.pagerank, lsm_gnn.sim.simulate  # noqa: F401, E401
    from lsm_gnn.train.loop import import_optimizer
    from lsm_gnn.config import parse_config

    import_optimizer(parse_config({}))  # 15 s of every training case here, paid once

    os.environ.setdefault("DGLBACKEND", "pytorch")
    t0 = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix="lsm-gnn-faults-", dir=workdir)).resolve()
    results = []
    try:
        base = make_base(root)
        width = max(len(c.name) for c in cases)
        for i, c in enumerate(cases, 1):
            res = run_case(c, root, base)
            results.append(res)
            flag = "" if res["outcome"] in GOOD else "  <-- BAD"
            say(f"[{i:2d}/{len(cases)}] {c.name:<{width}}  {res['outcome']:<14} {res['seconds']:6.1f} s  "
                f"{c.what}")
            say(f"{'':>{width + 8}}  -> {res['detail'][:400]}" + (f" ({'; '.join(res['notes'])})" if res["notes"]
                                                                  else "") + flag)
    finally:
        _cleanup(root)
    totals = {o: sum(r["outcome"] == o for r in results) for o in OUTCOMES}
    secs = time.monotonic() - t0
    say(f"{len(results)} cases in {secs:.0f} s: " + ", ".join(f"{o} {n}" for o, n in totals.items()))
    return {"cases": results, "totals": totals, "seconds": secs, "ok": all(r["outcome"] in GOOD for r in results)}
