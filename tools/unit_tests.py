"""Regenerate the workflow's unit tests (.tests/unit; docs/workflow.md, "Unit tests").

    python tools/unit_tests.py          # from the repository root, with the venv's Python

Runs the workflow with .tests/config/unit.yaml (a 2,000-node graph, a few iterations per window)
in the checkout with --notemp (so every job's inputs are there), lets Snakemake write one test per
rule (`--generate-unit-tests`), then: removes the rules listed in .tests/unit/excluded.yaml with
their data, passes only the unit-test config to each test (the generated list ends with
config/config.yaml, which would override it), copies the dataset to the report rules that need it
(NEEDS_DATASET), and puts back the maintained common.py (its checker
ignores a run record's provenance). Review `git diff --stat .tests/unit` before committing.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
UNIT = REPO / ".tests/unit"
CONFIG = ".tests/config/unit.yaml"
# report rules whose inputs are records of timed (excluded) jobs: Snakemake plans those jobs too in
# the test's folder and looks for their inputs, the dataset, so the dataset goes with these tests
NEEDS_DATASET = ("train_report", "baselines_report", "multidevice_report")


def main() -> int:
    snakemake = [sys.executable, "-m", "snakemake", "--configfile", CONFIG]
    subprocess.run([*snakemake, "--cores", "2", "--notemp"], cwd=REPO, check=True)
    keep = {name: (UNIT / name).read_text() for name in ("common.py", "excluded.yaml")}
    excluded = yaml.safe_load(keep["excluded.yaml"])
    shutil.rmtree(UNIT, ignore_errors=True)
    subprocess.run([*snakemake, "--generate-unit-tests", str(UNIT.relative_to(REPO))], cwd=REPO, check=True)
    for name, text in keep.items():
        (UNIT / name).write_text(text)
    for rule in excluded:
        (UNIT / f"test_{rule}.py").unlink(missing_ok=True)
        shutil.rmtree(UNIT / rule, ignore_errors=True)
    dataset = next((UNIT / "dataset_report/data/data").iterdir())
    for rule in NEEDS_DATASET:
        shutil.copytree(dataset, UNIT / rule / "data/data" / dataset.name, dirs_exist_ok=True)
    for test in sorted(UNIT.glob("test_*.py")):
        text = re.sub(r'^\s*"config/config\.yaml",\n', "", test.read_text(), flags=re.M)
        test.write_text(text)
    print(f"{len(list(UNIT.glob('test_*.py')))} rule tests in {UNIT}, {len(excluded)} rules excluded")
    return 0


if __name__ == "__main__":
    sys.exit(main())
