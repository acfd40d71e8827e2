"""`lsm-gnn bench compare`: interleaved and rotated repeats, medians with their spread, the flags,
the ratios over LSM-GNN, LSM-GNN's floor and the step-time sweep (runs stubbed with records of
known figures; the harness's own runs are tested in test_baselines_*.py)."""

from __future__ import annotations

import pytest

from lsm_gnn.bench import compare as bench
from lsm_gnn.bench import replicate
from lsm_gnn.config import load_config
from lsm_gnn.utils.seeds import run_seed


def test_rounds_rotate_so_that_every_system_takes_every_place():
    assert replicate.rotated_order(["a", "b", "c"], 4) == [["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"],
                                                       ["a", "b", "c"]]


def test_a_spread_above_five_percent_of_the_median_is_flagged():
    ok = replicate.spread_of([100, 102, 104, 101, 103])
    assert ok["median"] == 102 and ok["spread"] == pytest.approx(4 / 102) and not ok["flagged"]
    assert replicate.spread_of([100, 106, 103])["flagged"]
    assert replicate.spread_of([None])["median"] is None


def _record(system, steady, au, *, storage_ops=0, exchange=None, busy=0.01):
    its = 10
    m = {"time": {"epoch_steady_s": steady, "epoch_cold_s": steady, "first_epoch_s": steady,
                  "per_iteration": {"train": busy, "fetch_storage": 0.2},
                  "per_iteration_exposed": {"train": busy, "fetch_storage": 0.2 if system != "memory" else 0.0},
                  "timing_window": {"warmup_iters": 2, "timed_iters": its, "iterations_run_per_epoch": its + 2,
                                    "iterations_per_epoch": 100}},
         "accelerator": {"mode": "emulated", "profile": "a100", "au": au, "busy_s": busy * 2 * its * 2,
                         "iterations": 2 * its * 2, "workers": 2},
         "throughput": {"samples_per_s": 1000.0 / steady},
         "rows": {"storage_rows": storage_ops * 2 * 2 * its}, "traffic": {"storage_io_ops": storage_ops * 2 * 2 * its},
         "memory": {"all_devices_bytes": 2 ** 20}}
    if exchange is not None:
        m["multidevice"] = {"exchange_bytes_per_iteration": exchange}
    return {"system": system, "metrics": m, "epochs": [{}, {}]}


def test_compare_runs_every_system_in_rotated_rounds_and_reports_medians_ratios_and_the_floor(monkeypatch, tmp_path):
    import baselines.harness

    steady = {"lsm": iter([100, 101, 99]), "isolated": iter([120, 150, 119]), "direct": iter([130, 131, 129])}
    calls = []

    def fake_run(system, cfg, **kw):
        calls.append((system, cfg.train.accelerator_scale))
        if cfg.train.accelerator_scale != 1:  # the sweep: AU grows with the step
            return _record(system, 100, min(1.0, 0.1 * cfg.train.accelerator_scale))
        return _record(system, next(steady[system]), 0.05 if system == "lsm" else 0.04, storage_ops=1000,
                       exchange=4e6 if system == "lsm" else None)

    monkeypatch.setattr(baselines.harness, "run_system", fake_run)
    seen = {}

    def limits(cfg, **kw):
        seen.update(kw)
        return {"fio": {"available": True, "best_iops": 1e5, "best_depth": 64},
                "exchange": {"bytes_per_s": 1e9, "peer_bytes": 2e6}}

    monkeypatch.setattr(bench, "device_limits", limits)
    monkeypatch.setattr(bench, "fio_limit", lambda cfg, **kw: {"available": True, "best_iops": 9e4, "best_depth": 128})
    # the disk before each run: slow before isolated's second run (its 150 s)
    probes = iter([1e5, 1e5, 1e5, 5e4, 1e5, 1e5, 1e5, 1e5, 1e5] + [1e5] * 6)
    monkeypatch.setattr(bench, "disk_probe", lambda cfg, **kw: next(probes))
    ds = tmp_path / "ds"
    from lsm_gnn.datasets.synthetic import generate

    generate(ds, 200, feature_dim=4, seed=0, progress=False)
    cfg = load_config(None, [f"dataset.path={ds}", "train.accelerator=emulated"])
    res = bench.compare(cfg, systems=["lsm", "isolated", "direct"], repeats=3, sweep=[4, 16], limits=True)
    assert [s for s, _ in calls[:9]] == ["lsm", "isolated", "direct", "isolated", "direct", "lsm",
                                         "direct", "lsm", "isolated"]
    assert [k for _, k in calls[9:]] == [4, 4, 4, 16, 16, 16]
    L, iso = res["systems"]["lsm"], res["systems"]["isolated"]
    assert L["epoch_steady_s"]["median"] == 100 and not L["epoch_steady_s"]["flagged"]
    assert iso["epoch_steady_s"]["median"] == 120 and iso["epoch_steady_s"]["flagged"]  # 150 in one run
    assert res["isolated_vs_lsm_epoch"] == pytest.approx(1.2) and res["direct_vs_lsm_epoch"] == pytest.approx(1.3)
    assert res["flagged"] == ["isolated.epoch_steady_s"]
    # floor: step 0.01 s; storage 1000 reads per device and iteration, 2 devices / 1e5 IOPS = 0.02 s;
    # exchange 4e6 B / 2 devices / 1e9 B/s = 0.002 s -> 0.02 s x 100 iterations
    f = res["lsm_floor"]
    assert f["accelerator_step_s"] == pytest.approx(0.01) and f["storage_s"] == pytest.approx(0.02)
    assert f["exchange_s"] == pytest.approx(0.002) and f["bound"] == "storage_s" and f["epoch_s"] == pytest.approx(2.0)
    assert res["lsm_vs_floor"] == pytest.approx(50.0)
    t = res["targets"]
    assert t["lsm_epoch_le_isolated"] and t["lsm_epoch_le_direct"] and t["lsm_au_ge_isolated"]
    assert t["every_spread_within_5pct"] is False and t["lsm_within_1.25x_floor"] is False
    assert res["sustained_scale"] == {"lsm": 16.0, "isolated": 16.0, "direct": 16.0}  # AU 0.4 at x4, 1.0 at x16
    # the fio measured before the first run goes to the floor's limits (best of before and after)
    assert seen["fio_before"]["best_iops"] == 9e4
    # per round: isolated over lsm in rounds 0, 1, 2 = 120/100, 150/101, 119/99
    pr = res["per_round_vs_lsm"]["isolated"]
    assert pr["values"] == pytest.approx([1.2, 150 / 101, 119 / 99]) and pr["flagged"]
    assert res["per_round_vs_lsm"]["direct"]["values"] == pytest.approx([1.3, 131 / 101, 129 / 99])
    # the disk's rate before each run, and how each system's epoch follows its time per read
    d = res["disk"]
    assert d["iops_before_runs"]["min"] == 5e4 and d["iops_before_runs"]["runs"] == 9
    assert d["epoch_vs_disk_time_r"]["isolated"] == pytest.approx(1.0, abs=1e-3)
    assert [r["disk_iops_before"] for r in iso["runs"]] == [1e5, 5e4, 1e5]
    assert res["sweep"]["lsm"]["16"]["au"] == 1.0


def test_the_fastest_accelerator_sustained_is_the_smallest_multiple_reaching_ninety_percent(monkeypatch, tmp_path):
    import baselines.harness

    monkeypatch.setattr(baselines.harness, "run_system", lambda system, cfg, **kw: _record(
        system, 100, min(1.0, 0.05 * cfg.train.accelerator_scale)))
    from lsm_gnn.datasets.synthetic import generate

    generate(tmp_path / "ds", 200, feature_dim=4, seed=0, progress=False)
    cfg = load_config(None, [f"dataset.path={tmp_path / 'ds'}", "train.accelerator=emulated"])
    res = bench.compare(cfg, systems=["memory"], repeats=1, sweep=[8, 16, 32, 64], limits=False)
    assert res["sustained_scale"] == {"memory": 32.0}  # 0.4, 0.8, 1.0 (>= 0.9 first at x32)


def test_a_sweep_without_emulated_accelerators_is_refused_by_the_cli():
    from click.testing import CliRunner

    from lsm_gnn.cli import cli

    out = CliRunner().invoke(cli, ["bench", "compare", "--sweep", "2,4"])
    assert out.exit_code != 0 and "needs emulated accelerators (--accelerator)" in out.output
    out = CliRunner().invoke(cli, ["bench", "compare", "--accelerator", "a100", "--sweep", "2,x"])
    assert out.exit_code != 0 and "comma-separated step multiples" in out.output


def test_the_floor_takes_fios_best_moment_of_the_run():
    before = {"available": True, "best_iops": 7e4, "best_depth": 128}
    after = {"available": True, "best_iops": 9e4, "best_depth": 64}
    best = bench.best_of({"before": before, "after": after})
    assert best["best_iops"] == 9e4 and best["best_moment"] == "after" and best["best_depth"] == 64
    assert best["by_moment"] == {"before": before, "after": after}
    gone = bench.best_of({"before": {"available": False, "reason": "no fio"}, "after": {"available": False}})
    assert gone["available"] is False and gone["reason"] == "no fio"


def test_a_correlation_needs_three_known_pairs():
    assert replicate.correlation([1, 2, None, 4], [2, 4, 5, 8]) == pytest.approx(1.0)
    assert replicate.correlation([1, 2], [1, 2]) is None
    assert replicate.correlation([1, 1, 1], [1, 2, 3]) is None


def test_each_round_draws_a_new_seed_from_the_base_seed_and_every_system_of_a_round_shares_it(monkeypatch, tmp_path):
    import baselines.harness

    seen = []

    def fake_run(system, cfg, **kw):
        seen.append((system, cfg.train.seed))
        return _record(system, 100, 0.5)

    monkeypatch.setattr(baselines.harness, "run_system", fake_run)
    from lsm_gnn.datasets.synthetic import generate

    generate(tmp_path / "ds", 200, feature_dim=4, seed=0, progress=False)

    def run(base):
        seen.clear()
        cfg = load_config(None, [f"dataset.path={tmp_path / 'ds'}", "train.accelerator=emulated", f"train.seed={base}"])
        res = bench.compare(cfg, systems=["lsm", "direct"], repeats=4, limits=False)
        return res, list(seen)

    res, calls = run(7)
    by_round = res["seeds"]["by_round"]
    assert res["seeds"]["base"] == 7 and len(set(by_round)) == 4 and 7 not in by_round
    assert by_round == [run_seed(7, r) for r in range(4)]
    # round r: both systems (in rotated order) run with round r's seed, and each run says which
    assert calls == [("lsm", by_round[0]), ("direct", by_round[0]), ("direct", by_round[1]), ("lsm", by_round[1]),
                     ("lsm", by_round[2]), ("direct", by_round[2]), ("direct", by_round[3]), ("lsm", by_round[3])]
    assert [r["seed"] for r in res["systems"]["lsm"]["runs"]] == by_round
    # the same base seed gives the same comparison's seeds; another base other ones
    assert run(7)[1] == calls
    assert set(run(8)[0]["seeds"]["by_round"]).isdisjoint(by_round)


def test_a_single_run_keeps_the_configured_seed(monkeypatch, tmp_path):
    """`lsm-gnn run` goes to the harness with its config as it is: no seed is drawn there."""
    import baselines.harness

    from lsm_gnn.datasets.synthetic import generate

    generate(tmp_path / "ds", 200, feature_dim=4, seed=0, progress=False)
    cfg = load_config(None, [f"dataset.path={tmp_path / 'ds'}", "train.seed=5"])
    got = []
    monkeypatch.setattr(baselines.harness, "_run_lsm_family", lambda system, c, devices, progress: (
        got.append(c.train.seed), _record(system, 100, 0.5))[1])
    baselines.harness.run_system("lsm", cfg, devices=1)
    assert got == [5]


def test_busy_core_keeps_another_process_spinning_through_every_run_and_says_so(monkeypatch, tmp_path):
    import os

    import baselines.harness

    spinning = []

    def fake_run(system, cfg, **kw):
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
        cmdlines = []
        for p in pids:
            try:
                cmdlines.append(open(f"/proc/{p}/cmdline", "rb").read())
            except OSError:
                pass
        spinning.append(any(b"while True: pass" in c for c in cmdlines))
        return _record(system, 100, 0.05)

    monkeypatch.setattr(baselines.harness, "run_system", fake_run)
    from lsm_gnn.datasets.synthetic import generate

    generate(tmp_path / "ds", 200, feature_dim=4, seed=0, progress=False)
    cfg = load_config(None, [f"dataset.path={tmp_path / 'ds'}", "train.accelerator=emulated"])
    res = bench.compare(cfg, systems=["lsm", "direct"], repeats=2, limits=False, busy=True)
    assert spinning == [True] * 4 and res["busy_core"] is True
    assert next(iter(res["validation"]["replication"]["outputs"].values()))["busy_core"] is True
    spinning.clear()
    res = bench.compare(cfg, systems=["lsm"], repeats=1, limits=False)
    assert spinning == [False] and res["busy_core"] is False
