"""Fault cases of several ranks: a killed launcher, a killed, stopped or failing rank."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

from lsm_gnn.check.faults.base import Ctx, Outcome, _record_status, _spawn_cli, _wait_for, case, judge_error


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


@case("rank-sigstop-sigcont", "SIGSTOP of rank 1 for 10 s, then SIGCONT (within distributed.timeout_s=30)",
      cheap=False, timeout_s=240)
def _rank_pause(ctx: Ctx) -> Outcome:
    ds = ctx.dataset()
    rec = ctx.tmp / "run.json"
    args = _multi(ctx, ds, rec)
    args[args.index("50")] = "6"
    launcher = _spawn_cli(args)
    try:
        if not _wait_for(lambda: len(_training(launcher.pid)) >= 2 or launcher.poll() is not None, 200, 0.2):
            return Outcome("hang", "the ranks never started training")
        ranks = _rank_pids(launcher.pid)
        os.kill(ranks[-1], signal.SIGSTOP)
        time.sleep(10)
        os.kill(ranks[-1], signal.SIGCONT)
        try:
            rc = launcher.wait(timeout=180)
        except subprocess.TimeoutExpired:
            return Outcome("hang", "the launcher did not end 180 s after the rank was resumed")
        status = _record_status(rec)
        if rc == 0 and status == "complete":
            return Outcome("recovered", "rank 1 paused 10 s and resumed: the run completed (a pause is no failure)")
        failure = json.loads(rec.read_text()).get("failure") if status == "failed" else None
        return Outcome("silently wrong", f"a pause within the timeout failed the run: exit status {rc}, record "
                                         f"{status}" + (f": rank {failure['rank']}: {failure['message'][:200]}"
                                                        if failure else ""))
    finally:
        for p in _rank_pids(launcher.pid):
            with contextlib.suppress(OSError):
                os.kill(p, signal.SIGCONT)
                os.kill(p, signal.SIGKILL)
        if launcher.poll() is None:
            launcher.kill()


@case("ranks-fail-before-start", "train --devices 2 with distributed.master_addr nonexistent.invalid (fails "
      "before any rank starts)")
def _ranks_before(ctx: Ctx) -> Outcome:
    ds = ctx.dataset()
    rec = ctx.tmp / "run.json"
    ran = ctx.cli(*_multi(ctx, ds, rec, "--set", "distributed.master_addr=nonexistent.invalid"))
    out = judge_error(ran, rec, names="master_addr")
    if out.outcome == "clear error":  # no record: a failure before the ranks writes one too
        return Outcome("silently wrong", f"{out.detail}; no failed record at {rec.name}")
    return out
