"""The workflow as Snakemake users expect it: `snakemake --lint` finds nothing and snakefmt would
change nothing, on the default config and on the forms whose rules differ (a real dataset adds the
download and preparation rules; no heterogeneous graph drops two)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
pytestmark = pytest.mark.skipif(not (BIN / "snakemake").exists(), reason="snakemake is not installed next to this Python")


@pytest.mark.parametrize("config", [[], ["dataset=igb-tiny", "hetero_size=null"]])
def test_snakemake_lint_finds_nothing(tmp_path, config):
    cmd = [str(BIN / "snakemake"), "--snakefile", str(REPO / "workflow/Snakefile"), "--directory", str(tmp_path),
           "--lint"]
    if config:
        cmd += ["--config", *config]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=dict(os.environ, DGLBACKEND="pytorch"))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "Lints for" not in out and "good condition" in out, out


@pytest.mark.skipif(not (BIN / "snakefmt").exists(), reason="snakefmt is not installed next to this Python")
def test_snakefmt_would_change_nothing():
    proc = subprocess.run([str(BIN / "snakefmt"), "--check", "workflow"], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
