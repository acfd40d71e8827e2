"""The report's tables are rounded for reading (workflow/scripts/wfcommon.py: reading, md_table)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow" / "scripts"))
from wfcommon import md_table, reading  # noqa: E402


def test_a_table_cell_has_no_more_digits_than_a_reader_needs():
    assert reading(6149902336.0) == "6,149,902,336"
    assert reading(416.8644512286679) == "416.9"
    assert reading(33.20545657666917) == "33.21"
    assert reading(0.6321) == "0.632"
    assert reading(-0.0417) == "-0.042"
    assert reading(0.0) == "0"
    assert reading(np.float64(1234.56)) == "1,235"
    assert reading(np.int64(1111)) == "1,111"
    assert reading(float("nan")) == "" and reading(None) == ""
    assert reading(True) == "True" and reading("lsm d2") == "lsm d2"


def test_the_baselines_table_from_the_reference_report_reads_as_rounded_figures():
    df = pd.DataFrame({"system": ["direct d2"], "epoch_steady_s": [416.8644512286679], "runs": [1],
                       "storage_bytes": [6149902336.0], "au": [float("nan")]})
    assert md_table(df).splitlines()[2] == "| direct d2 | 416.9 | 1 | 6,149,902,336 |  |"
