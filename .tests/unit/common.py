"""Common code of the workflow's unit tests (generated with Snakemake's --generate-unit-tests, then
kept here: tools/unit_tests.py regenerates them and puts this file back; docs/workflow.md, "Unit tests").

Every expected output is compared byte for byte, as Snakemake's generated checker does, except the
provenance of a run record (lsm_gnn/records.py): when it was made, on which machine, with which
versions and commit. Those describe the run, not its result; everything else in a record must agree.
"""

import json
import os
from pathlib import Path
from subprocess import STDOUT, CalledProcessError, check_output

import pytest

# a run record's fields that say where and when it ran (schema: lsm_gnn/records.py)
PROVENANCE = ("created", "versions", "git_commit", "hardware")


def _record(path: Path):
    """A run record without its provenance, or None when `path` is not a run record."""
    try:
        doc = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError):
        return None
    if not (isinstance(doc, dict) and "schema_version" in doc and "created" in doc):
        return None
    return {k: v for k, v in doc.items() if k not in PROVENANCE}


class OutputChecker:
    def __init__(self, data_path, expected_path, workdir):
        self.data_path = data_path
        self.expected_path = expected_path
        self.workdir = workdir

    def check(self):
        workdir_files = set(
            (Path(path) / f).relative_to(self.workdir)
            for path, subdirs, files in os.walk(self.workdir)
            for f in files
            if "/.snakemake" not in path and "/config" not in path
        )
        expected_files = set(
            (Path(path) / f).relative_to(self.expected_path)
            for path, subdirs, files in os.walk(self.expected_path)
            for f in files
        )
        assert expected_files.issubset(workdir_files), f"Output files missing: {expected_files - workdir_files}"
        for f in sorted(expected_files):
            self.compare_files(self.expected_path / f, self.workdir / f)

    def compare_files(self, expected_file, generated_file):
        if expected_file.suffix == ".json":
            want = _record(expected_file)
            if want is not None:
                got = _record(generated_file)
                if got != want:
                    diff = sorted(k for k in set(want) | set(got or {}) if (got or {}).get(k) != want.get(k))
                    pytest.fail(f"{expected_file} differs (record fields {diff})", pytrace=False)
                return
        try:
            check_output(["cmp", expected_file, generated_file], stderr=STDOUT, text=True)
        except CalledProcessError as e:
            pytest.fail(f"{expected_file} differs:\n\n{e.output}", pytrace=False)
