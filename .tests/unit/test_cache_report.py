"""
Rule test code for unit testing of rules generated with Snakemake 9.27.1.
"""

import os
import sys
import shutil
import tempfile
from pathlib import Path
from subprocess import check_output

sys.path.insert(0, os.path.dirname(__file__))


def test_cache_report(conda_prefix):

    with tempfile.TemporaryDirectory() as tmpdir:
        workdir = Path(tmpdir) / "workdir"
        config_path = Path(".tests/unit/cache_report/config")
        data_path = Path(".tests/unit/cache_report/data")
        expected_path = Path(".tests/unit/cache_report/expected")

        # Copy config to the temporary workdir.
        shutil.copytree(config_path, workdir)

        # Copy data to the temporary workdir.
        shutil.copytree(data_path, workdir, dirs_exist_ok=True)

        # Run the test job.
        check_output(
            [
                "python",
                "-m",
                "snakemake",
                "reports/synthetic-2000-d8/sections/30-cache.md",
                "reports/synthetic-2000-d8/figures/cache_storage_rows.png",
                "reports/synthetic-2000-d8/figures/cache_policies_no_buffer.png",
                "reports/synthetic-2000-d8/figures/cache_scaling.png",
                "reports/synthetic-2000-d8/figures/cache_regime.png",
                "results/synthetic-2000-d8/cache/summary.csv",
                "results/synthetic-2000-d8/cache/regime.json",
                "--snakefile",
                "workflow/Snakefile",
                "-f",
                "--notemp",
                "--show-failed-logs",
                "-j1",
                "--target-files-omit-workdir-adjustment",
                "--allowed-rules",
                "cache_report",
                "--configfile",
                ".tests/config/unit.yaml",
                "--directory",
                workdir,
            ]
            + conda_prefix
        )

        # Check the output byte by byte using cmp/zmp/bzcmp/xzcmp.
        # To modify this behavior, you can inherit from common.OutputChecker in here
        # and overwrite the method `compare_files(generated_file, expected_file),
        # also see common.py.
        import common
        common.OutputChecker(data_path, expected_path, workdir).check()
