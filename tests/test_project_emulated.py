"""The projection against the emulated testbed (lsm_gnn.project.emulated): an emulated run record
projected on its testbed's profile with the machine the emulation had, and the check
`projection_vs_emulation` of `lsm-gnn bench validate` and bench compare's validation."""

from __future__ import annotations

import copy
import json

import pytest
from click.testing import CliRunner

from lsm_gnn.bench.validate import validation
from lsm_gnn.cli import cli
from lsm_gnn.project.emulated import LIMIT, check, emulation_sets, project_emulated
from lsm_gnn.project.profiles import load_profile
from lsm_gnn.records import validate_record
from test_project import distdgl_record, hand_record

SSD = {"iops": 1e4, "bandwidth": 7e9, "latency_s": 4.5e-5, "max_queue_depth": 1024}
HERE = load_profile("this-machine")


def emulated(rec, epoch, *, valid=True, f=1.0, per_iteration=None):
    """`rec` as a run of the emulated testbed at S = 64 on the paper profile, its epoch divided back."""
    rec = copy.deepcopy(rec)
    rec["metrics"]["storage"] = {"device": "emulated", "profile": {"profile": "paper", "ssd": SSD, "ssds_per_device": 2,
                                                                    "shared": False, "time_scale": 64.0}}
    rec["metrics"]["emulation"] = {"time_scale": 64.0, "epoch_steady_s": epoch, "valid": valid,
                                   "invalid_causes": [] if valid else ["gpu stages ended 1.7 % late (limit 1 %)"],
                                   "per_iteration": per_iteration or {"fetch_storage": 0.05, "train": 0.005}}
    rec["metrics"]["testbed"] = {"profile": "paper", "host_speed": f}
    validate_record(rec)
    return rec


def lsm_record(epoch=5.25, **kw):
    rec = hand_record()
    rec["config"]["cache"] = {"readahead": True}
    return emulated(rec, epoch, **kw)


def test_an_emulated_lsm_run_is_projected_with_its_emulated_ssds_and_compared_with_its_emulated_epoch():
    got = project_emulated(lsm_record(), "lsm.json", HERE.cpu.index_s)
    # 1,000 reads per device and iteration on 2 emulated SSDs of 10k IOPS: 50 ms, read ahead in a lane
    # of their own, the longest: 100 iterations, 5.0 s against the emulated 5.25 s
    assert "storage.ssd_iops=10000.0" in got["profile_overrides"] and got["profile"] == "paper"
    assert got["projected_epoch_s"] == pytest.approx(5.0)
    assert got["error"] == pytest.approx(5.0 / 5.25 - 1)
    assert got["projected_bound"] == {"bottleneck": "lane:reads", "stage": "reads: storage"}
    assert got["emulated_bound"] == {"stage": "fetch_storage", "part": "ssd", "seconds": 0.05}


def test_dist_dgl_host_figures_are_this_machines_core_times_the_host_factor_the_testbed_charged():
    rec = emulated(distdgl_record(), 10.0, f=2.0, per_iteration={"sample": 0.02, "exchange_rows": 0.04})
    sets = dict(x.split("=", 1) for x in emulation_sets(rec, "d.json", HERE.cpu.index_s))
    assert float(sets["cpu.kvstore_row_s"]) == pytest.approx(2 * HERE.cpu.kvstore_row_s)
    assert float(sets["cpu.rpc_sample_rows_per_s"]) == pytest.approx(HERE.cpu.rpc_sample_rows_per_s / 2)
    # this machine twice as slow now as when the figures were measured: twice the seconds again
    slow = dict(x.split("=", 1) for x in emulation_sets(rec, "d.json", 2 * HERE.cpu.index_s))
    assert float(slow["cpu.kvstore_row_s"]) == pytest.approx(4 * HERE.cpu.kvstore_row_s)
    got = project_emulated(rec, "d.json", HERE.cpu.index_s)
    assert got["emulated_bound"]["part"] == "host" and got["emulated_bound"]["stage"] == "exchange_rows"
    assert got["error"] == pytest.approx(got["projected_epoch_s"] / 10.0 - 1)


def test_the_check_takes_valid_runs_only_and_needs_lsm_and_dist_dgl_within_ten_percent():
    ok_lsm = project_emulated(lsm_record(), "a.json", HERE.cpu.index_s)
    late = project_emulated(lsm_record(epoch=4.0, valid=False), "b.json", HERE.cpu.index_s)
    dd = project_emulated(emulated(distdgl_record(), 1.0), "d.json", HERE.cpu.index_s)
    dd_fit = {**dd, "error": 0.03}
    res = check([ok_lsm, late, dd_fit])
    assert res["systems"]["lsm"]["error"] == pytest.approx(ok_lsm["error"])   # the invalid run not counted
    assert res["systems"]["lsm"]["valid_runs"] == 1 and len(res["systems"]["lsm"]["runs"]) == 2
    assert res["ok"] and res["limit"] == LIMIT and res["missing"] == []
    assert not check([ok_lsm])["ok"] and check([ok_lsm])["missing"] == ["distdgl"]
    only_late = check([late, dd_fit])["systems"]["lsm"]
    assert only_late["error"] is None and "no valid run" in only_late["why_none"] and "1.7 % late" in only_late["why_none"]
    assert not check([ok_lsm, {**dd, "error": 0.12}])["ok"]
    assert check([]) is None


def test_bench_validate_projects_emulated_records_and_bench_compares_rows_reach_its_validation(tmp_path, monkeypatch):
    import lsm_gnn.project.calibrate as cal

    monkeypatch.setattr(cal, "cpu_index_seconds", lambda reps=cal.REPS, seed=0: HERE.cpu.index_s)
    a, d = tmp_path / "lsm-r0.json", tmp_path / "distdgl-r0.json"
    a.write_text(json.dumps(lsm_record()))
    d.write_text(json.dumps(emulated(distdgl_record(), 1.0)))
    res = CliRunner().invoke(cli, ["bench", "validate", str(a), str(d), "--json"])
    assert res.exit_code == 0, res.output
    pe = json.loads(res.output)["projection_vs_emulation"]
    assert set(pe["systems"]) == {"lsm", "distdgl"} and pe["profiles"] == ["paper"]
    assert pe["systems"]["lsm"]["error"] == pytest.approx(5.0 / 5.25 - 1)
    text = CliRunner().invoke(cli, ["bench", "validate", str(a), str(d)])
    assert "validation, projection vs emulation (profile paper): lsm -4.8 %" in text.output
    assert "emulated bound fetch_storage on the ssd, 50.00 ms per iteration" in text.output
    # a bench compare output carries its runs' rows: its validation (and a re-run of it) reads them
    rows = [project_emulated(lsm_record(), "lsm-r0", HERE.cpu.index_s)]
    out = validation([{"benchmark": "compare", "systems": {}, "projection_vs_emulation_runs": rows}])
    assert out["projection_vs_emulation"]["systems"]["lsm"]["runs"][0]["source"] == "lsm-r0"


def test_dist_dgl_host_figures_come_from_the_runs_own_host_charges_and_the_pull_waits_for_the_remote_server():
    rec = distdgl_record()
    rec["metrics"]["traffic"]["network_bytes"] = 2 * 5 * 2 * 8000 * 1000   # 8,000 rows sent per machine and iteration
    rec["metrics"]["distdgl"]["network_bytes_over_epochs"] = [1]
    rec = emulated(rec, 20.0, f=2.0)
    # 4 trainers x 5 charged iterations: 20 charges; the servers are charged for all 2 x 5 iterations
    # run: 0.4 s of pull handling per machine and iteration
    rec["metrics"]["testbed"]["stages"] = {
        "exchange_rows": {"count": 20, "charged_s": 20 * 0.03}, "sample": {"count": 20, "charged_s": 20 * 0.01},
        "server_pull": {"count": 40, "charged_s": 10 * 2 * 0.4}, "server_sample": {"count": 40, "charged_s": 1.0}}
    sets = dict(x.split("=", 1) for x in emulation_sets(rec, "d.json", HERE.cpu.index_s))
    assert float(sets["cpu.kvstore_row_s"]) == pytest.approx(0.03 / 10000)   # the charge already holds f
    assert float(sets["cpu.rpc_sample_rows_per_s"]) == pytest.approx(10000 / 0.01)
    assert float(sets["cpu.kvstore_server_row_s"]) == pytest.approx(0.4 / 8000)
    got = project_emulated(rec, "d.json", HERE.cpu.index_s)
    assert got["projected_bound"] == {"bottleneck": "lane:trainer", "stage": "kv_pull"}
