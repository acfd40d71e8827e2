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
