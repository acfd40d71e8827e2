"""workflow/scripts/reproduce.sh, the documented command's wrapper, with a stand-in Snakemake (a shell
script that logs its arguments): it unlocks then runs; it waits for a killed run's processes that
still hold its flock while they exit; it refuses, naming the flock, when another run stays alive."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "workflow/scripts/reproduce.sh"
pytestmark = pytest.mark.skipif(subprocess.run(["which", "flock"], capture_output=True).returncode != 0,
                                reason="flock(1) (util-linux) is not installed")


def fake_snakemake(tmp_path: Path) -> Path:
    exe = tmp_path / "snakemake"
    exe.write_text(f'#!/bin/sh\necho "$@" >> {tmp_path / "calls.txt"}\n')
    exe.chmod(0o755)
    return exe


def hold_flock(workdir: Path, seconds: float) -> subprocess.Popen:
    """A process that holds workdir/.snakemake/reproduce.flock for `seconds`, as a dying run's would."""
    (workdir / ".snakemake").mkdir(parents=True, exist_ok=True)
    code = ("import fcntl, sys, time\n"
            f"f = open({str(workdir / '.snakemake/reproduce.flock')!r}, 'w')\n"
            "fcntl.flock(f, fcntl.LOCK_EX)\nprint('held', flush=True)\n"
            f"time.sleep({seconds})\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def run(tmp_path: Path, workdir: Path, wait_s: float) -> subprocess.CompletedProcess:
    env = dict(os.environ, REPRODUCE_LOCK_WAIT_S=str(wait_s))
    return subprocess.run(["bash", str(SCRIPT), str(fake_snakemake(tmp_path)), "--directory", str(workdir), "all"],
                          env=env, capture_output=True, text=True, timeout=60)


def test_with_no_other_run_it_unlocks_then_runs_snakemake_with_the_same_arguments(tmp_path):
    ran = run(tmp_path, tmp_path / "wd", wait_s=5)
    assert ran.returncode == 0, ran.stderr
    calls = (tmp_path / "calls.txt").read_text().splitlines()
    assert calls == [f"--directory {tmp_path / 'wd'} all --unlock", f"--directory {tmp_path / 'wd'} all"]


def test_a_killed_runs_processes_still_exiting_are_waited_for_and_the_rerun_goes_on(tmp_path):
    wd = tmp_path / "wd"
    holder = hold_flock(wd, seconds=1.5)
    t0 = time.perf_counter()
    ran = run(tmp_path, wd, wait_s=20)
    holder.wait()
    assert ran.returncode == 0, ran.stderr
    assert "waiting up to 20 s" in ran.stderr
    assert time.perf_counter() - t0 >= 1.0   # it did wait for the holder rather than run beside it
    assert (tmp_path / "calls.txt").read_text().splitlines()[-1] == f"--directory {wd} all"


def test_a_run_still_alive_after_the_wait_is_refused_naming_the_flock_and_snakemake_never_runs(tmp_path):
    wd = tmp_path / "wd"
    holder = hold_flock(wd, seconds=30)
    try:
        ran = run(tmp_path, wd, wait_s=1)
    finally:
        holder.kill()
        holder.wait()
    assert ran.returncode == 2
    assert "another run through this script is still alive" in ran.stderr
    assert str(wd / ".snakemake/reproduce.flock") in ran.stderr
    assert not (tmp_path / "calls.txt").exists()
