"""Fault cases of interrupted workflow jobs: what the kill test (tests/test_workflow_kill.py) found,
one mechanism per case. Each runs a one-rule Snakefile whose job is an `lsm-gnn` command, through
the documented command (workflow/scripts/reproduce.sh with profiles/default, as `make reproduce`),
kills the whole process group with SIGKILL at a chosen point and reruns it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from lsm_gnn.check.faults.base import Ctx, Outcome, _wait_for, case

REPO = Path(__file__).resolve().parents[3]
REPRODUCE = REPO / "workflow/scripts/reproduce.sh"
PROFILE = REPO / "profiles/default"
# one job: generate a graph into out/ds (atomically: under a hidden .ds.*.partial sibling), then
# optionally wait, so that a kill can land while it writes or after it wrote but before Snakemake
# took the job as finished
SNAKEFILE = """
rule all:
    input:
        "out/ds/metadata.json",


# metadata.json, not directory(): Snakemake would add its timestamp file to the dataset's folder
rule generate:
    output:
        "out/ds/metadata.json",
    params:
        nodes=config.get("nodes", 2000),
        wait=config.get("wait", 0),
    shell:
        "{python} -m lsm_gnn.cli dataset generate {params.nodes} --dim 16 --out out/ds --force --no-progress "
        "&& sleep {params.wait}"
"""


def _snakemake() -> Path:
    return Path(sys.executable).with_name("snakemake")


def _args(ctx: Ctx, *config: str) -> list[str]:
    return ["--snakefile", str(ctx.tmp / "Snakefile"), "--directory", str(ctx.tmp / "wd"), "--cores", "1",
            "--workflow-profile", str(PROFILE), *(["--config", *config] if config else [])]


def _setup(ctx: Ctx) -> str | None:
    """Write the Snakefile; the reason this case cannot run here, if any."""
    if not _snakemake().exists():
        return f"snakemake is not installed next to {sys.executable}"
    if not REPRODUCE.exists():
        return f"{REPRODUCE} is missing (the workflow lives in a checkout of the repository)"
    (ctx.tmp / "Snakefile").write_text(SNAKEFILE.replace("{python}", sys.executable))
    (ctx.tmp / "wd").mkdir()
    return None


def _env() -> dict:
    return dict(os.environ, DGLBACKEND="pytorch", PYTHONPATH=os.pathsep.join(
        [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]))


def _start(ctx: Ctx, args: list[str], plain: bool = False) -> subprocess.Popen:
    cmd = [str(_snakemake()), *args] if plain else ["bash", str(REPRODUCE), str(_snakemake()), *args]
    log = open(ctx.tmp / "snakemake.log", "a")
    # its own session: the kill reaches Snakemake and its job, as a lost node would
    return subprocess.Popen(cmd, cwd=ctx.tmp, env=_env(), stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)


def _kill(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _partials(ctx: Ctx) -> list[Path]:
    return sorted((ctx.tmp / "wd/out").glob(".ds.*.partial")) if (ctx.tmp / "wd/out").is_dir() else []


def _locks(ctx: Ctx) -> list[Path]:
    d = ctx.tmp / "wd/.snakemake/locks"
    return sorted(d.iterdir()) if d.is_dir() else []


def _finish(ctx: Ctx, args: list[str], timeout: float = 120) -> tuple[int, str]:
    """Rerun the documented command to the end: its exit status and what it printed."""
    start = (ctx.tmp / "snakemake.log").stat().st_size if (ctx.tmp / "snakemake.log").exists() else 0
    proc = _start(ctx, args)
    try:
        rc = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill(proc)
        rc = -9
    with open(ctx.tmp / "snakemake.log", errors="replace") as f:
        f.seek(start)
        return rc, f.read()


def _verified(ctx: Ctx) -> str | None:
    """None when out/ds is a complete dataset; else what is wrong."""
    ran = ctx.cli("dataset", "verify", ctx.tmp / "wd/out/ds", "--quick", "--no-progress")
    return None if ran.error is None else f"dataset verify: {ran.output.strip().splitlines()[-1:]}"


@case("workflow-killed-stale-lock", "the workflow killed (SIGKILL) with a job running leaves Snakemake's lock; "
      "rerun the documented command", cheap=False, timeout_s=240)
def _stale_lock(ctx: Ctx) -> Outcome:
    why = _setup(ctx)
    if why:
        return Outcome("clear error", why)
    args = _args(ctx, "wait=120")
    proc = _start(ctx, args)
    if not _wait_for(lambda: (ctx.tmp / "wd/out/ds/metadata.json").exists() or proc.poll() is not None, 120):
        _kill(proc)
        return Outcome("hang", "the job never wrote its dataset")
    _kill(proc)
    if not _locks(ctx):
        return Outcome("silently wrong", "no Snakemake lock after the kill: the case did not set up its fault")
    plain = _start(ctx, args, plain=True)
    plain.wait(timeout=120)
    ctx.note(f"a plain snakemake rerun exits {plain.returncode} (the stale lock: 'Directory cannot be locked')")
    rc, out = _finish(ctx, _args(ctx, "wait=0"))
    if rc != 0:
        return Outcome("silently wrong" if "cannot be locked" in out else "traceback",
                       f"the documented command's rerun exits {rc}: {out.strip().splitlines()[-1:]}")
    bad = _verified(ctx)
    if bad:
        return Outcome("silently wrong", f"the rerun finished but {bad}")
    return Outcome("recovered", "reproduce.sh removed the stale lock (no other run holds its flock) and the "
                   "rerun finished the cut-off job; the dataset verifies")


@case("workflow-killed-mid-write", "the workflow killed (SIGKILL) while its job writes an output; rerun "
      "the documented command", cheap=False, timeout_s=240)
def _mid_write(ctx: Ctx) -> Outcome:
    why = _setup(ctx)
    if why:
        return Outcome("clear error", why)
    args = _args(ctx, "nodes=60000")
    proc = _start(ctx, args)
    if not _wait_for(lambda: bool(_partials(ctx)) or proc.poll() is not None, 120, poll=0.02):
        _kill(proc)
        return Outcome("hang", "the job never started writing")
    _kill(proc)
    if proc.returncode == 0 and not _partials(ctx):
        return Outcome("silently wrong", "the job finished before the kill: the case did not set up its fault")
    if (ctx.tmp / "wd/out/ds/metadata.json").exists():
        return Outcome("silently wrong", "a dataset stood at the output path while its writer was cut off")
    left = [p.name for p in _partials(ctx)]
    rc, out = _finish(ctx, args)
    if rc != 0:
        return Outcome("traceback", f"the rerun exits {rc}: {out.strip().splitlines()[-1:]}")
    bad = _verified(ctx)
    if bad:
        return Outcome("silently wrong", f"the rerun finished but {bad}")
    if _partials(ctx):
        return Outcome("silently wrong", f"the rerun left the killed writer's {[p.name for p in _partials(ctx)]}")
    named = "left by an interrupted writer" in out
    ctx.note(f"after the kill: nothing at out/ds, the writer's {left}")
    return Outcome("recovered", "the output path never held a half-written dataset; the rerun wrote it anew"
                   + (" and named and removed the killed writer's partial folder" if named else
                      " (the partial folder went with Snakemake's removal of the incomplete output)"))


@case("workflow-killed-after-write", "the workflow killed (SIGKILL) after its job wrote its output but before "
      "the job ended (Snakemake's incomplete marker); rerun the documented command", cheap=False, timeout_s=240)
def _incomplete_marker(ctx: Ctx) -> Outcome:
    why = _setup(ctx)
    if why:
        return Outcome("clear error", why)
    meta = ctx.tmp / "wd/out/ds/metadata.json"
    proc = _start(ctx, _args(ctx, "wait=120"))
    if not _wait_for(lambda: meta.exists() or proc.poll() is not None, 120):
        _kill(proc)
        return Outcome("hang", "the job never wrote its dataset")
    _kill(proc)
    marks = ctx.tmp / "wd/.snakemake/incomplete"
    if not (marks.is_dir() and any(p.is_file() for p in marks.rglob("*"))):
        return Outcome("silently wrong", "no incomplete marker after the kill: Snakemake would take the job as done")
    first = meta.stat().st_mtime_ns
    time.sleep(0.05)
    rc, out = _finish(ctx, _args(ctx, "wait=0"))
    if rc != 0:
        return Outcome("traceback", f"the rerun exits {rc}: {out.strip().splitlines()[-1:]}")
    if not meta.exists() or meta.stat().st_mtime_ns == first:
        return Outcome("silently wrong", "the rerun took the output of the cut-off job as finished")
    bad = _verified(ctx)
    if bad:
        return Outcome("silently wrong", f"the rerun finished but {bad}")
    return Outcome("recovered", "the output of the cut-off job was not taken as finished: --rerun-incomplete "
                   "(profiles/default) reran the job" + (" (Snakemake: 'Incomplete')" if "ncomplete" in out else ""))
