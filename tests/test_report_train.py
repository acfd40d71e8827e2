"""The one-device training section over repeated runs (workflow/scripts/train_report.py, run here as
Snakemake runs it, with its `snakemake` object): every time a median with its min-max over the
runs, the ratio to the ideal counted only when both systems' runs agree (the replication limit),
the loss check made round by round."""

from __future__ import annotations

import copy
import json
import runpy
import sys
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from conftest import _build_random_dataset
from lsm_gnn.bench.replicate import SPREAD_LIMIT
from lsm_gnn.config import load_config
from lsm_gnn.train.loop import run_training

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "workflow" / "scripts" / "train_report.py"


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One real record of each system (LSM-GNN's cache over the buffered reader, the in-memory
    ideal) on the same seed: the runs below are copies with their epoch times set."""
    tmp = tmp_path_factory.mktemp("train")
    ds = _build_random_dataset(tmp / "ds", num_nodes=600, dim=16)
    base = {"dataset.path": str(ds.root), "sampler.batch_size": 64, "sampler.fanouts": [4, 4],
            "model.hidden": 16, "train.epochs": 2, "train.eval_nodes": 100, "train.threads": 1,
            "train.warmup_iters": 1, "train.timed_iters": 2}
    systems = {"lsm": {"storage.reader": "buffered", "storage.drop_page_cache": False, "cache.enabled": True,
                       "cache.capacity_fraction": 0.2},
               "memory": {"storage.reader": "memory", "cache.enabled": False}}
    recs = {}
    for name, over in systems.items():
        path = tmp / f"{name}.json"
        run_training(load_config(None, {**base, **over}), progress=False, record_path=path)
        recs[name] = json.loads(path.read_text())
        recs[name]["system"] = name
    return ds, recs


def report(tmp: Path, trained, steady: dict[str, list[float]]) -> tuple[pd.DataFrame, str]:
    """Write run r of each system with the given steady epoch, run the script, return its table and
    fragment."""
    ds, recs = trained
    paths = []
    for name, times in steady.items():
        for r, t in enumerate(times):
            rec = copy.deepcopy(recs[name])
            rec["metrics"]["time"]["epoch_steady_s"] = t
            rec["config"]["train"]["seed"] = 100 + r
            p = tmp / f"{name}-r{r}.json"
            p.write_text(json.dumps(rec))
            paths.append(str(p))
    out = SimpleNamespace(table=str(tmp / "summary.csv"), time_fig=str(tmp / "time.png"),
                          acc_fig=str(tmp / "acc.png"), fragment=str(tmp / "40-train.md"))
    sm = SimpleNamespace(input=SimpleNamespace(records=paths), output=out, log=[],
                         params=SimpleNamespace(dataset={"kind": "synthetic", "hetero": False, "tag": "random"},
                                                data=str(ds.root), seed=0))
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        runpy.run_path(str(SCRIPT), init_globals={"snakemake": sm})
    finally:
        sys.path.remove(str(SCRIPT.parent))
    assert Path(out.time_fig).stat().st_size > 1000 and Path(out.acc_fig).stat().st_size > 1000
    return pd.read_csv(out.table).set_index("system"), Path(out.fragment).read_text()


def ratio_cell(fragment: str) -> str:
    lines = [line for line in fragment.splitlines() if line.startswith("|")]
    col = [c.strip() for c in lines[0].strip("|").split("|")].index("steady vs ideal")
    row = next(line for line in lines if line.startswith("| LSM-GNN"))
    return [c.strip() for c in row.strip("|").split("|")][col]


def test_runs_that_agree_give_the_ratio_of_the_medians_with_each_systems_min_and_max(tmp_path, trained):
    table, text = report(tmp_path, trained, {"lsm": [10.0, 10.2, 10.1, 10.3, 10.05],
                                             "memory": [5.0, 5.1, 5.05, 5.02, 5.08]})
    lsm = table.loc["LSM-GNN (O_DIRECT + cache)"]
    assert lsm.runs == 5 and lsm.epoch_steady_s == pytest.approx(10.1)
    assert (lsm.epoch_steady_min_s, lsm.epoch_steady_max_s) == (pytest.approx(10.0), pytest.approx(10.3))
    assert lsm.steady_spread == pytest.approx(0.3 / 10.1) and lsm.steady_spread < SPREAD_LIMIT
    assert lsm.steady_vs_memory == pytest.approx(10.1 / 5.05) and bool(lsm.steady_vs_memory_counted)
    # per round: 10.0/5.0 ... 10.05/5.08
    assert ratio_cell(text) == "2.00x (5 rounds; per round 1.98-2.05x)"
    assert "10.10 [10.00, 10.30]" in text and "identical (to 1e-6) in 5 of 5 rounds" in text


def test_a_system_whose_runs_spread_beyond_the_limit_leaves_the_ratio_not_measured(tmp_path, trained):
    table, text = report(tmp_path, trained, {"lsm": [10.0, 12.0, 10.1, 10.3, 10.05],
                                             "memory": [5.0, 5.1, 5.05, 5.02, 5.08]})
    lsm = table.loc["LSM-GNN (O_DIRECT + cache)"]
    assert lsm.steady_spread == pytest.approx(2.0 / 10.1) and not bool(lsm.steady_vs_memory_counted)
    cell = ratio_cell(text)
    assert cell.startswith("not measured here (2.00x from the medians") and "spread 19.8 %, 2.0 %" in cell


def test_one_run_of_a_system_gives_no_ratio(tmp_path, trained):
    table, text = report(tmp_path, trained, {"lsm": [10.0], "memory": [5.0]})
    assert ratio_cell(text) == "not measured here (2.00x from one run of a system: no spread)"
    assert table.loc["in-memory ideal"].runs == 1 and table.loc["in-memory ideal"].steady_spread == 0
