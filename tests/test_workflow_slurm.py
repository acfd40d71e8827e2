"""The workflow on a real SLURM cluster: a one-node cluster on this machine (tests/slurm/cluster.sh:
Debian's slurm-wlm and munge, slurmctld and slurmd, installed when missing as fio is), the shrunk
synthetic-tiny reproduction of the kill test submitted through profiles/slurm (every rule one SLURM
job with its threads, memory and runtime), and its report's hardware-independent figures against
a local run of the same config. Its own target and CI step (make slurm-test): the SLURM run (about
15 minutes on the 2-core VM, 2026-12-05) and a local one (214 s), or only the SLURM run where the
kill test kept its uninterrupted run of the same commit and config ($LSM_GNN_SHRUNK_RUN, as .ci/run
sets it)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from test_workflow_kill import SHRUNK, kept_run

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
TAG = "synthetic-tiny-d64"


def snakemake(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [str(BIN / "snakemake"), "--snakefile", str(REPO / "workflow/Snakefile"), "--directory", str(workdir),
           *args, "--config", *SHRUNK]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=2400,
                          env=dict(os.environ, DGLBACKEND="pytorch"))


@pytest.mark.slurm
@pytest.mark.timeout(3000)
def test_the_reproduction_as_slurm_jobs_gives_the_local_runs_figures(tmp_path):
    up = subprocess.run(["bash", str(REPO / "tests/slurm/cluster.sh"), "start"], capture_output=True, text=True,
                        timeout=900)
    assert up.returncode == 0, up.stdout + up.stderr
    cluster, local = tmp_path / "slurm", tmp_path / "local"
    # no accounting daemon on the one-node cluster: job states from squeue (MinJobAge 600 s)
    proc = snakemake(cluster, "--workflow-profile", str(REPO / "profiles/slurm"), "--slurm-status-command", "squeue")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    submitted = out.count("has been submitted with SLURM jobid")
    assert submitted >= 40 and "No wall time" not in out and "No job memory" not in out
    kept = kept_run(SHRUNK)  # the kill test's uninterrupted run of the same commit and config
    if kept is not None:
        local = kept
        print(f"\nthe local run: the kill test's, kept at {kept}")
    else:
        proc = snakemake(local, "--cores", "2")
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
    cmp = subprocess.run([sys.executable, "-m", "lsm_gnn.cli", "report", "compare", str(local / "reports" / TAG),
                          str(cluster / "reports" / TAG), "--json"], capture_output=True, text=True,
                         env=dict(os.environ, DGLBACKEND="pytorch"))
    res = json.loads(cmp.stdout)
    print(f"\nSLURM run: {submitted} jobs submitted; figures {res['figures']}")
    assert res["agree"] and res["figures"]["equal"] > 100
