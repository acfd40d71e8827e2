"""Fault cases of the outputs: records, full and read-only file systems, locks, leftovers, saved traces."""

from __future__ import annotations

import os
import signal
import time

from lsm_gnn.check.faults.base import (BASE_DIM, BASE_NODES, Ctx, GOOD, Outcome, _first_line, _lock_held, _spawn_cli,
                                       _wait_for, case, judge_error, judge_run)


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


# outputs that are not the writer's: data loss, replaced files, concurrent writers from other folders
def _tree(folder) -> dict:
    """Every entry under `folder` (links not followed) with its kind and bytes: what a command must not touch."""
    out = {}
    for p in sorted(folder.rglob("*")):
        rel = p.relative_to(folder).as_posix()
        out[rel] = ("link", os.readlink(p)) if p.is_symlink() else ("file", p.read_bytes()) if p.is_file() \
            else ("dir", None) if p.is_dir() else ("other", p.stat().st_mode)
    return out


def _kept(ctx: Ctx, folder, ran, names: str | None = None) -> Outcome:
    """A clear error, and every file of `folder` as it was before (else: data lost or replaced)."""
    out = judge_error(ran, names=names)
    if _tree(folder) != ctx.before:
        changed = sorted(set(ctx.before) ^ set(_tree(folder))) or ["(contents)"]
        return Outcome("silently wrong", f"{out.detail}; DATA LOST OR REPLACED: {changed[:5]}")
    return out


def _user_folder(ctx: Ctx, name: str = "work"):
    folder = ctx.tmp / name
    (folder / "notes").mkdir(parents=True)
    (folder / "thesis.tex").write_text("years of work")
    (folder / "notes" / "a.txt").write_text("a")
    ctx.before = _tree(folder)
    return folder


@case("generate-force-user-folder", "dataset generate --out FOLDER --force onto a folder of the user's files")
def _gen_force_user(ctx: Ctx) -> Outcome:
    folder = _user_folder(ctx)
    ran = ctx.cli("dataset", "generate", "500", "--dim", "8", "--out", folder, "--force", "--no-progress")
    return _kept(ctx, folder, ran, names="--force")


@case("generate-force-dot", "dataset generate --out . --force in a folder of the user's files (cwd)")
def _gen_force_dot(ctx: Ctx) -> Outcome:
    folder = _user_folder(ctx)
    os.chdir(folder)
    try:
        ran = ctx.cli("dataset", "generate", "500", "--dim", "8", "--out", ".", "--force", "--no-progress")
    finally:
        os.chdir(ctx.tmp)
    return _kept(ctx, folder, ran, names="--force")


@case("generate-force-user-file-in-dataset", "dataset generate --force onto a dataset the user added a file to")
def _gen_force_added(ctx: Ctx) -> Outcome:
    ds = ctx.dataset()
    (ds / "my-results.csv").write_text("mine")
    ctx.before = _tree(ctx.tmp)
    ran = ctx.cli("dataset", "generate", "500", "--dim", "8", "--out", ds, "--force", "--no-progress")
    return _kept(ctx, ctx.tmp, ran, names="my-results.csv")


@case("generate-force-symlink", "dataset generate --force onto a symlink to a dataset")
def _gen_force_link(ctx: Ctx) -> Outcome:
    ds = ctx.dataset()
    (ctx.tmp / "link").symlink_to(ds)
    ctx.before = _tree(ctx.tmp)
    ran = ctx.cli("dataset", "generate", "500", "--dim", "8", "--out", ctx.tmp / "link", "--force", "--no-progress")
    return _kept(ctx, ctx.tmp, ran, names="symbolic link")


@case("import-force-user-folder", "dataset import --out FOLDER --force onto a folder of the user's files")
def _imp_force_user(ctx: Ctx) -> Outcome:
    import numpy as np

    folder = _user_folder(ctx)
    np.save(ctx.tmp / "e.npy", np.array([[0, 1], [1, 2], [2, 0]], np.int64))
    ctx.before = _tree(ctx.tmp)
    ran = ctx.cli("dataset", "import", "--edges", ctx.tmp / "e.npy", "--out", folder, "--force", "--no-progress")
    return _kept(ctx, ctx.tmp, ran, names="--force")


@case("record-is-symlink", "--record names a symlink to a user's file; train")
def _record_link(ctx: Ctx) -> Outcome:
    ds = ctx.dataset()
    (ctx.tmp / "mine.json").write_text("the user's")
    (ctx.tmp / "run.json").symlink_to("mine.json")
    ctx.before = _tree(ctx.tmp)
    return _kept(ctx, ctx.tmp, ctx.train(ds, ctx.tmp / "run.json"), names="symbolic link")


@case("record-is-fifo", "--record names a FIFO (a device such as /dev/null was replaced as root); train")
def _record_fifo(ctx: Ctx) -> Outcome:
    ds = ctx.dataset()
    os.mkfifo(ctx.tmp / "run.json")
    ctx.before = _tree(ctx.tmp)
    return _kept(ctx, ctx.tmp, ctx.train(ds, ctx.tmp / "run.json"), names="FIFO")


@case("record-name-too-long", "--record with a 300-byte name; train (checked before the run)")
def _record_long(ctx: Ctx) -> Outcome:
    return judge_error(ctx.train(ctx.dataset(), ctx.tmp / ("r" * 300 + ".json")), names="allows")


@case("simulate-outputs-symlinks", "simulate --out, --save-trace and --record onto symlinks to a user's file")
def _sim_links(ctx: Ctx) -> Outcome:
    ds = ctx.dataset()
    (ctx.tmp / "mine").write_text("the user's")
    for name in ("o.csv", "t.npz", "r.json"):
        (ctx.tmp / name).symlink_to("mine")
    ctx.before = _tree(ctx.tmp)
    outs = []
    for opt, name in (("--out", "o.csv"), ("--save-trace", "t.npz"), ("--record", "r.json")):
        ran = ctx.cli("simulate", ds, "--trace-only", "--max-batches", "1", "--batch-size", "64", "--fanouts", "2,2",
                      opt, ctx.tmp / name)
        outs.append(_kept(ctx, ctx.tmp, ran, names="symbolic link"))
    bad = [o for o in outs if o.outcome not in GOOD]
    return bad[0] if bad else Outcome("clear error", "; ".join(o.detail for o in outs)[:600])


@case("two-records-two-tmpdirs", "a second train on one record path from another $TMPDIR while the first holds it")
def _two_tmpdirs(ctx: Ctx) -> Outcome:
    from lsm_gnn.records import claim_record

    rec = ctx.tmp / "shared.json"
    (ctx.tmp / "t1").mkdir()
    (ctx.tmp / "t2").mkdir()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the first writer, from its own temporary folder
        try:
            os.environ["TMPDIR"] = str(ctx.tmp / "t1")
            with claim_record(rec):
                os.write(w, b"x")
                time.sleep(30)
        finally:
            os._exit(0)
    try:
        os.read(r, 1)
        os.environ["TMPDIR"] = str(ctx.tmp / "t2")
        import tempfile

        tempfile.tempdir = None
        return judge_error(ctx.train(ctx.dataset(), rec), names="shared.json")
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


@case("trace-header-terabytes", "simulate --trace of a 66 KB .npz whose ids header states 10**12 values")
def _trace_huge(ctx: Ctx) -> Outcome:
    import io
    import json
    import zipfile

    import numpy as np
    from numpy.lib import format as npf

    tr = ctx.tmp / "t.npz"
    b = io.BytesIO()
    npf.write_array_header_1_0(b, {"descr": "<i8", "fortran_order": False, "shape": (10**12,)})
    with zipfile.ZipFile(tr, "w") as z:
        z.writestr("ids.npy", b.getvalue() + b"\0" * 65_000)
        for name, arr in (("offsets", np.array([0, 0], np.int64)),
                          ("header", np.frombuffer(json.dumps({"num_devices": 1, "num_rows": BASE_NODES,
                                                               "num_batches": 1}).encode(), np.uint8))):
            a = io.BytesIO()
            np.save(a, arr)
            z.writestr(f"{name}.npy", a.getvalue())
    return judge_error(ctx.cli("simulate", ctx.dataset(), "--trace", tr, "--policy", "hybrid"), names="t.npz")
