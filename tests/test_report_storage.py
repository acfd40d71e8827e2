"""The storage section (workflow/scripts/storage_report.py) over a `bench storage` output: a ratio
is "measured" (median [min, max], N runs) when its spread over the rounds is within SPREAD_LIMIT,
"not measured here" otherwise, and from a single run; the figure gets min-max error bars."""

from __future__ import annotations

import json
import runpy
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from lsm_gnn.bench.replicate import SPREAD_LIMIT
from lsm_gnn.bench.storage import TARGETS, median_fio, median_point, round_ratios

SCRIPTS = Path(__file__).resolve().parents[1] / "workflow" / "scripts"


def point(reader, pattern, batch, rate):
    return {"reader": reader, "backend": "x", "pattern": pattern, "batch_size": batch, "batches": 2, "rows": 2 * batch,
            "seconds": 0.5, "rows_per_s": rate, "gb_per_s": rate * 4096 / 1e9, "storage_gb_per_s": rate * 4096 / 1e9,
            "iops": rate, "block_iops": rate, "io_ops": 2 * batch, "bytes_read": 2 * batch * 4096,
            "read_amplification": 1.0, "in_place_batches": 0, "path_info": {"reader": reader}}


def fio(iops, bw):
    return {"available": True, "rw": "randread", "bs": "4k", "iodepth": 32, "engine": "psync", "iops": iops,
            "bw_bytes_per_s": bw, "lat_s": 1e-4, "command": "fio"}


def bench(direct_rates, fio_iops, repeats=None):
    """A bench storage output over len(direct_rates) rounds (direct random and sequential points at
    4096 rows, memory alongside), fio's random IOPS and sequential bandwidth per round."""
    rounds = [[point("direct", "random", 4096, d), point("direct", "sequential", 4096, d),
               point("memory", "random", 4096, 1e6 + i)] for i, d in enumerate(direct_rates)]
    fr = [fio(f, f * 4096) for f in fio_iops]
    rr = round_ratios(rounds, fr, fr, 1 << 20)
    obj = {"benchmark": "storage", "file": "features.bin", "num_rows": 1 << 20, "row_bytes": 4096,
           "row_stride": 4096, "file_bytes": 4096 << 20, "seconds_per_point": 0.5,
           "repeats": repeats or len(direct_rates), "spread_limit": SPREAD_LIMIT,
           "fio": {"random": median_fio(fr), "sequential": dict(median_fio(fr), iodepth=16)},
           "results": [median_point([r[j] for r in rounds]) for j in range(3)],
           **{k: v["median"] for k, v in rr.items()}, "ratio_rounds": rr, "targets": TARGETS}
    if repeats == 1:  # the output before --repeats: one run, no per-round values
        for r in obj["results"]:
            r.pop("per_round"), r.pop("spread")
        obj.pop("ratio_rounds"), obj.pop("repeats"), obj.pop("spread_limit")
    return obj


def report(tmp_path, obj) -> str:
    src = tmp_path / "bench.json"
    src.write_text(json.dumps(obj))
    out = SimpleNamespace(fragment=str(tmp_path / "20-storage.md"), figure=str(tmp_path / "storage.png"))
    sm = SimpleNamespace(input=[str(src)], output=out, log=[])
    sys.path.insert(0, str(SCRIPTS))
    try:
        runpy.run_path(str(SCRIPTS / "storage_report.py"), init_globals={"snakemake": sm})
    finally:
        sys.path.remove(str(SCRIPTS))
    assert Path(out.figure).stat().st_size > 0
    return Path(out.fragment).read_text()


def test_ratios_within_the_spread_limit_are_measured(tmp_path):
    # 5 rounds; each round's ratio is its own point over its own fio: 0.9, 0.91, 0.92, 0.92, 0.93
    fio_iops = [100.0, 110.0, 90.0, 100.0, 100.0]
    direct = [90.0, 100.1, 82.8, 92.0, 93.0]
    text = report(tmp_path, bench(direct, fio_iops))
    line = next(ln for ln in text.splitlines() if "random_iops_vs_fio" in ln)
    assert "measured: 0.92 [0.90, 0.93], median [min, max] of 5 runs" in line and "not measured" not in line
    assert "at or above the 80% target" in line and "spread 3.3%" in line
    assert "no repeats" not in text and "5 rounds" in text
    assert "(spread 20.0% over 5 runs)" in text  # fio's own spread over the rounds, stated


def test_a_wide_spread_is_not_a_measurement(tmp_path):
    text = report(tmp_path, bench([70.0, 90.0, 92.0, 93.0, 95.0], [100.0] * 5))
    line = next(ln for ln in text.splitlines() if "seq_bw_vs_fio" in ln)
    assert "not measured here (0.92 [0.70, 0.95], median [min, max] of 5 runs: spread 27.2% over 5 runs" in line
    assert f"above the {SPREAD_LIMIT:.0%} limit" in line


def test_one_run_is_not_a_measurement(tmp_path):
    text = report(tmp_path, bench([92.0], [100.0], repeats=1))
    assert "not measured here (0.92 from one 0.5 s point against one fio run, no repeats" in text
    assert "one run" in text
