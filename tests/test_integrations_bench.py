"""`lsm-gnn bench loader` runs every loader on the same source and batches and reports ratios
against lsm-gnn's own loader (no timing is asserted: only that each figure is there)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from lsm_gnn.datasets.synthetic import generate
from lsm_gnn.bench.loader import bench_loader


def test_the_loader_benchmark_reports_each_loaders_ratio_to_its_own_loader(tmp_path):
    ds = generate(tmp_path / "ds", 2000, feature_dim=16, num_classes=4, progress=False)
    res = CliRunner().invoke(bench_loader, [str(ds.root), "--reader", "buffered", "--batch-size", "64",
                                            "--fanouts", "3,3", "--iters", "2", "--warmup", "1", "--repeat", "2",
                                            "--step-ms", "0,1", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert [r["step_ms"] for r in out["results"]] == [0.0, 1.0]
    for r in out["results"]:
        assert set(r["vs_own"]) == {"dgl", "pyg", "dgl_native_sampler"}
        assert all(len(v) == 2 for v in r["per_iteration_s"].values())
        assert all(v["min"] <= v["median"] <= v["max"] and len(v["ratios"]) == 2 for v in r["vs_own"].values())
