"""The testbed's stage table (lsm_gnn.testbed) and the charging primitive (lsm_gnn.storage.charge)."""

from __future__ import annotations

import os

import pytest

from lsm_gnn.metrics import STAGES
from lsm_gnn.storage.charge import Charger, CoreSpeed, charge_summary, charger_for, link_seconds, probe_seconds
from lsm_gnn.testbed import GPU_RATES, PARTS, TABLE, as_record, charges, component, part_of
from lsm_gnn.utils.errors import InputError


def test_every_record_stage_of_every_system_has_a_part_of_the_testbed():
    for system in ("lsm", "isolated", "direct", "mmap", "memory", "distdgl"):
        for stage in STAGES:
            assert component(system, stage) in PARTS, (system, stage)


def test_every_table_entry_names_a_known_part_and_a_record_stage():
    for system, rows in TABLE.items():
        for stage, p in rows.items():
            assert p.part in PARTS and p.record_stage in STAGES and p.basis, (system, stage)


def test_a_stage_not_in_the_table_is_an_error_naming_it():
    with pytest.raises(InputError, match="no stage 'decode' of system 'lsm'"):
        part_of("lsm", "decode")
    with pytest.raises(InputError, match="no system 'pyg'"):
        part_of("pyg", "sample")


def test_the_paper_testbed_puts_distdgl_host_work_on_the_host_and_its_copy_on_pcie():
    assert part_of("distdgl", "sample").part == "host"
    assert part_of("distdgl", "exchange_rows").part == "host"
    assert part_of("distdgl", "copy_to_gpu").part == "pcie"
    assert part_of("distdgl", "pull_rpc").part == "nic"
    assert part_of("lsm", "fetch_cache").part == "gpu" and part_of("lsm", "exchange_rows").part == "pcie"
    assert as_record("distdgl")["copy_to_gpu"]["record_stage"] == "other"


def test_the_gpu_rate_grows_with_the_requests_from_a_fixed_part():
    r = GPU_RATES["fetch_cache"]
    assert r.seconds(0) == r.fixed_s and r.seconds(81_000) > r.seconds(21_000) > r.fixed_s


class FakeTime:
    """A clock (ns), a thread CPU clock and a wait that jumps to the deadline plus `oversleep`."""

    def __init__(self):
        self.now = 1_000_000
        self.cpu = 0
        self.oversleep = 0

    def clock(self):
        return self.now

    def cpu_clock(self):
        return self.cpu

    def wait(self, deadline):
        self.now = max(self.now, deadline) + self.oversleep
        return self.now

    def work(self, cpu_ns, off_cpu_ns=0):
        self.cpu += cpu_ns
        self.now += cpu_ns + off_cpu_ns


def charger(S=64.0, f=1.0):
    t = FakeTime()
    return t, Charger(S, f, clock=t.clock, cpu_clock=t.cpu_clock, wait=t.wait)


def test_a_host_stage_ends_at_s_times_f_times_its_thread_cpu_time_not_its_wall_time():
    t, c = charger(S=16, f=2.0)
    t0 = t.now
    with c.host("sample"):
        t.work(1_000_000, off_cpu_ns=5_000_000)  # 1 ms of CPU, 5 ms held off the CPU
    assert t.now - t0 == 16 * 2 * 1_000_000
    s = c.summary()["stages"]["sample"]
    assert s["component"] == "host" and s["charged_s"] == pytest.approx(2e-3) and s["late_fraction"] == 0.0


def test_a_link_stage_ends_at_bytes_over_bandwidth_plus_latency_times_s():
    t, c = charger(S=64)
    t0 = t.now
    c.link("copy_to_gpu", "pcie", t0, nbytes=25e6, bandwidth=25e9, latency_s=1e-5)
    assert t.now - t0 == pytest.approx(64 * (1e-3 + 1e-5) * 1e9, abs=2)
    assert link_seconds(25e6, 25e9, 1e-5, transfers=3) == pytest.approx(1e-3 + 3e-5)
    assert c.summary()["parts"]["pcie"]["charged_s"] == pytest.approx(1.01e-3)


def test_a_link_stage_charged_nothing_is_never_late_so_dist_dgl_on_one_machine_stays_valid():
    t, c = charger(S=32)
    t0 = t.now
    t.now += 3_000      # the microseconds between the stage's start and its end: nothing to pace
    c.link("sample_rpc", "nic", t0, 0, bandwidth=12.5e9, latency_s=5e-6, transfers=0)
    out = c.summary()
    assert out["valid"] and out["parts"]["nic"] == {"charged_s": 0.0, "late_s": 0.0, "late_fraction": 0.0,
                                                    "valid": True, "cause": None}
    t0 = t.now          # one round trip charged: late past its charge as before
    t.oversleep = 1_000_000
    c.link("sample_rpc", "nic", t0, 0, bandwidth=12.5e9, latency_s=5e-6, transfers=1)
    assert not c.summary()["valid"]


def test_an_additive_host_stage_stretches_only_its_own_work_and_keeps_the_waits():
    t, c = charger(S=10)
    t0 = t.now
    with c.host("sample", additive=True):
        t.work(1_000_000)
        t.now += 7_000_000  # waiting on a server that charged itself
    assert t.now - t0 == 1_000_000 + 7_000_000 + 9 * 1_000_000
    assert c.summary()["stages"]["sample"]["charged_s"] == pytest.approx(1e-3)


def test_host_work_is_charged_at_the_reference_cores_speed_when_this_core_runs_slower():
    t = FakeTime()
    probes = iter([2e-3, 2e-3, 2e-3, 1e-3])            # this core at half the reference's speed, then at it
    core = CoreSpeed(1e-3, every_s=0.0, keep=1, probe=lambda: next(probes), clock=t.clock)
    c = Charger(16, 1.0, clock=t.clock, cpu_clock=t.cpu_clock, wait=t.wait, core=core)
    t0 = t.now
    with c.host("sample"):
        t.work(2_000_000)                              # 2 ms of CPU here = 1 ms on the reference core
    assert t.now - t0 == 16 * 1_000_000
    t0 = t.now
    with c.host("pull", additive=True):
        t.work(2_000_000)
        t.now += 3_000_000                             # a wait charged elsewhere, kept as it was
    assert t.now - t0 == 2_000_000 + 3_000_000 + (16 * 1_000_000 - 2_000_000)
    st = c.summary()["stages"]
    assert st["sample"]["cpu_s"] == pytest.approx(2e-3) and st["sample"]["cpu_reference_s"] == pytest.approx(1e-3)
    assert st["sample"]["charged_s"] == pytest.approx(1e-3) and st["pull"]["charged_s"] == pytest.approx(1e-3)
    t0 = t.now
    with c.host("sample"):
        t.work(2_000_000)
    with c.host("sample"):                             # the core back at the reference speed
        t.work(2_000_000)
    assert core.probes == 4


def test_the_core_probe_runs_at_most_every_interval_and_takes_the_median_of_the_last_probes():
    t = FakeTime()
    probes = iter([1e-3, 3e-3, 2e-3, 9e-3])
    core = CoreSpeed(1e-3, every_s=0.25, keep=3, probe=lambda: next(probes), clock=t.clock)
    assert core.factor() == pytest.approx(1.0)
    t.now += 100_000_000                               # 0.1 s later: no new probe
    assert core.factor() == pytest.approx(1.0) and core.probes == 1
    for _ in range(3):
        t.now += 300_000_000
        core.factor()
    assert core.probes == 4                            # the last 3: 3, 2 and 9 ms, median 3 ms
    assert core.factor() == pytest.approx(1 / 3)
    with pytest.raises(InputError, match="reference time"):
        CoreSpeed(0.0)


def test_a_real_probe_takes_positive_cpu_time_and_the_testbed_args_choose_the_core():
    assert 0 < probe_seconds(reps=1) < 1.0
    assert charger_for({"time_scale": 8, "host_speed": 1.0}).core is None
    assert charger_for({"time_scale": 8, "host_speed": 1.0, "host_core": "this"}).core is None
    assert charger_for({"time_scale": 8, "host_speed": 1.0, "host_core": "reference"}).core is not None


def test_a_busy_machine_makes_a_host_stage_late_and_the_run_invalid_with_that_cause():
    t, c = charger(S=4)
    with c.host("server_pull"):
        t.work(1_000_000, off_cpu_ns=10_000_000)  # off the CPU far beyond the 3 ms of padding
    out = c.summary()
    assert not out["valid"] and out["parts"]["host"]["late_fraction"] > 0.01
    assert "machine is busy" in out["invalid_causes"][0]


def test_a_scale_too_small_is_told_from_a_busy_machine():
    t, c = charger(S=1, f=0.5)  # the paper's core twice as fast as this one, no dilation
    with c.host("sample"):
        t.work(1_000_000)
    out = c.summary()
    assert not out["valid"] and "scale is too small" in out["invalid_causes"][0]
    # a copy slower than its link's charge: the work itself outran the model
    t, c = charger(S=1)
    t0 = t.now
    t.work(5_000_000)
    c.link("copy_to_gpu", "pcie", t0, nbytes=1e6, bandwidth=25e9, work_cpu_ns=5_000_000)
    assert "scale is too small" in c.summary()["invalid_causes"][0]


def test_a_late_wake_under_one_percent_keeps_the_run_valid():
    t, c = charger(S=64)
    t.oversleep = 1_000  # 1 us late on a 64 ms charge
    with c.host("sample"):
        t.work(1_000_000)
    out = c.summary()
    assert out["valid"] and 0 < out["stages"]["sample"]["late_fraction"] < 0.01


def test_a_windowed_charger_reports_only_the_timed_iterations_and_not_the_cold_warm_up():
    from lsm_gnn.storage import emulated

    emulated.timed_windows_reset()
    try:
        t, c = charger(S=8)
        c.windowed = True
        t0 = t.now
        t.work(50_000_000)  # the cold first fetch: its work far beyond a 1 ms charge
        c.until("fetch_cache", "gpu", t0, 1e-3 / 8)
        assert c.summary()["valid"] is False  # no window opened yet: every stage counts
        emulated.timed_window_begin(t.now)
        t0 = t.now
        t.work(100_000)
        c.until("fetch_cache", "gpu", t0, 1e-3 / 8)
        emulated.timed_window_end(t.now)
        t0 = t.now
        t.work(50_000_000)  # late again, between the windows (the next epoch's warm-up)
        c.until("fetch_cache", "gpu", t0, 1e-3 / 8)
        out = c.summary()
        assert out["valid"] and out["stages"]["fetch_cache"]["count"] == 1
        emulated.timed_windows_reset()  # the loop forgets its windows before the source reports
        assert c.summary()["stages"]["fetch_cache"]["count"] == 1
    finally:
        emulated.timed_windows_reset()


def test_the_summary_merges_the_processes_of_a_run():
    t, a = charger(S=8)
    with a.host("server_pull"):
        t.work(2_000_000)
    t2, b = charger(S=8)
    with b.host("server_pull"):
        t2.work(1_000_000)
    out = charge_summary([a.raw(), b.raw()], 8, 1.0)
    assert out["stages"]["server_pull"]["count"] == 2
    assert out["stages"]["server_pull"]["charged_s"] == pytest.approx(3e-3)


def test_an_unknown_part_or_a_bad_scale_is_refused():
    t, c = charger()
    with pytest.raises(InputError, match="unknown part 'disk'"):
        c.until("x", "disk", t.now, 1e-3)
    with pytest.raises(InputError, match="positive time scale"):
        Charger(0, 1.0)


def test_each_record_stage_says_its_component_and_how_late_its_charged_work_ended():
    from lsm_gnn.testbed import stage_view

    t, c = charger(S=8)
    with c.host("server_pull"):
        t.work(1_000_000)
    t.oversleep = 80_000  # 1 % of the 8 ms charge
    with c.host("exchange_rows"):
        t.work(1_000_000)
    tb = c.summary()
    view = stage_view("distdgl", {"sample": 0.001, "exchange_rows": 0.002, "train": 0.004}, tb)
    assert view["exchange_rows"]["component"] == "host" and view["train"]["component"] == "accelerator"
    # the pull's two table stages (trainer and server) reported under exchange_rows: 80 us late of 16 ms
    assert view["exchange_rows"]["late_fraction"] == pytest.approx(0.005)
    assert view["sample"]["late_fraction"] is None and view["sample"]["charged"] is True
    # LSM-GNN's storage stage takes the device's pacing; its cache stage is charged at the GPU rate by
    # the shared cache, the isolated caches' is not charged at the GPU yet
    lsm = stage_view("lsm", {"fetch_storage": 0.01, "fetch_cache": 0.002}, None, storage_late_fraction=0.003)
    assert lsm["fetch_storage"]["late_fraction"] == 0.003 and lsm["fetch_storage"]["component"] == "ssd"
    assert lsm["fetch_cache"] == {"seconds": 0.002, "component": "gpu", "charged": True, "late_fraction": None}
    iso = stage_view("isolated", {"fetch_cache": 0.002}, None)
    assert iso["fetch_cache"] == {"seconds": 0.002, "component": "gpu", "charged": False, "late_fraction": None}
    assert charges("lsm", "gpu") and not charges("isolated", "gpu") and not charges("distdgl", "gpu")
    with pytest.raises(InputError, match="no part 'disk'; expected one of accelerator, gpu"):
        charges("lsm", "disk")


def test_figures_come_from_valid_runs_only_and_a_system_without_one_has_none():
    from lsm_gnn.bench.replicate import summarise_system

    runs = [{"epoch_steady_s": 10.0 + i, "au": 0.9, "samples_per_s": 1.0, "first_epoch_s": 1.0, "valid": False,
             "invalid_causes": ["late"], "round": f"r{i}"} for i in range(2)]
    out = summarise_system(runs)
    assert out["epoch_steady_s"]["median"] is None and out["valid_runs"] == 0 and len(out["invalid_runs"]) == 2
    runs[1]["valid"] = True
    out = summarise_system(runs)
    assert out["epoch_steady_s"]["median"] == 11.0 and out["valid_runs"] == 1


def test_the_primitive_check_reports_each_scale_quiet_and_busy_and_fails_beyond_two_percent(monkeypatch):
    import lsm_gnn.bench.validate as v

    errs = {1.0: 0.001, 16.0: 0.015, 64.0: 0.03}
    monkeypatch.setattr(v, "primitive_run", lambda S, f, reps=3: {"error": [errs[S]], "valid": True})
    monkeypatch.setattr(v, "busy_core", lambda **kw: __import__("contextlib").nullcontext())
    out = v.primitive_check(1.0)
    assert set(out["runs"]) == {f"{k}@{s:g}" for k in ("quiet", "busy") for s in (1, 16, 64)}
    assert out["worst_error"] == 0.03 and out["ok"] is False
    errs[64.0] = 0.019
    assert v.primitive_check(1.0)["ok"] is True


def test_a_kernel_charged_below_its_own_cpu_time_is_a_scale_too_small():
    from lsm_gnn.bench.validate import primitive_run

    r = primitive_run(1.0, 0.01, reps=1, kernel_ns=2_000_000)
    assert not r["valid"] and r["cause_kind"] == "scale"


def test_lsm_gnn_in_the_testbed_charges_its_exchange_on_pcie_and_its_cache_work_at_the_gpu_rate(tmp_path):
    """storage.device: emulated through the harness: the shared cache's id and row exchange charged as
    PCIe peer-to-peer, the owner's cache work at the GPU engine's measured rate, the charges of both
    ranks in metrics.testbed, each record stage naming its part."""
    import conftest
    from baselines.harness import run_system
    from lsm_gnn.config import load_config
    from lsm_gnn.testbed import stage_view

    ds = conftest._build_random_dataset(tmp_path / "ds", num_nodes=3000, dim=16, seed=3)
    cfg = load_config(None, [f"dataset.path={ds.root}", "sampler.batch_size=64", "sampler.fanouts=[3,3]",
                             "model.hidden=8", "train.epochs=2", "train.eval=false", "train.warmup_iters=1",
                             "train.timed_iters=3", "train.accelerator=emulated", "train.accelerator_profile=a100",
                             "train.threads=1", "storage.device=emulated", "storage.device_profile=paper",
                             "emulation.time_scale=16"])
    rec = run_system("lsm", cfg, devices=2)
    tb = rec["metrics"]["testbed"]
    assert tb["processes_charged"] == 2 and "testbed_per_rank" not in rec["metrics"]
    st = tb["stages"]
    assert st["exchange_ids"]["component"] == "pcie" and st["exchange_rows"]["component"] == "pcie"
    assert st["fetch_cache"]["component"] == "gpu" and st["fetch_cache"]["count"] >= 2 * 3
    # the charge of the cache work is the GPU rate's: at least its fixed part per batch
    assert st["fetch_cache"]["charged_s"] >= GPU_RATES["fetch_cache"].fixed_s * st["fetch_cache"]["count"]
    view = stage_view("lsm", rec["metrics"]["time"]["per_iteration"], tb)
    assert view["exchange_rows"]["charged"] and view["exchange_rows"]["late_fraction"] is not None


def _distdgl_output(S, epoch, stages, machines=1, trainers=1):
    return {"benchmark": "compare", "storage_device": "emulated", "storage_profile": "paper", "accelerator": "a100",
            "time_scale": S, "machines": machines, "trainers_per_machine": trainers, "host_speed": 1.0,
            "systems": {"distdgl": {"epoch_steady_s": {"median": epoch, "spread": 0.01, "runs": 3, "flagged": False},
                                    "spread": 0.01, "per_iteration": stages}}}


def test_host_ground_truth_compares_dist_dgl_one_by_one_at_scale_one_with_a_larger_scale():
    from lsm_gnn.bench.validate import validation

    a = _distdgl_output(1, 10.0, {"sample": 0.010, "exchange_rows": 0.020, "train": 0.005, "other": 0.0})
    b = _distdgl_output(64, 10.3, {"sample": 0.0105, "exchange_rows": 0.0206, "train": 0.005, "other": 0.0})
    h = validation([b, a])["host_ground_truth"]
    assert h["time_scales"] == [1.0, 64] and set(h["stages"]) == {"sample", "exchange_rows", "train"}
    assert h["epoch"] == pytest.approx(0.03) and h["ok"] is True
    b["systems"]["distdgl"]["per_iteration"]["sample"] = 0.0125  # a stage 25 % off
    assert validation([a, b])["host_ground_truth"]["ok"] is False
    # two machines are not the ground truth (their trainers contend): no check
    assert validation([a, _distdgl_output(64, 10.0, {}, machines=2)])["host_ground_truth"] is None


def test_the_claim_is_decided_only_where_f_half_one_and_two_give_the_same_class():
    from lsm_gnn.bench.validate import claim_class, validation

    def out(f, r):
        o = _distdgl_output(64, 10.0 * r, {})
        o["systems"]["lsm"] = {"epoch_steady_s": {"median": 10.0, "spread": 0.0, "runs": 3}, "spread": 0.0}
        o.update({"host_speed": f, "distdgl_vs_lsm_epoch": r, "machines": 2, "trainers_per_machine": 2})
        return o

    assert [claim_class(x) for x in (4.0, 3.75, 2.0, 1.0, 0.8, None)] == \
        [">= 3.75", ">= 3.75", "between 1 and 3.75", "<= 1", "<= 1", None]
    v = validation([out(0.5, 1.5), out(1.0, 2.4), out(2.0, 3.7)])["verdict"]
    assert v["decided"] and v["class"] == "between 1 and 3.75" and v["by_host_speed"]["2"]["ratio"] == 3.7
    v = validation([out(0.5, 1.5), out(1.0, 2.4), out(2.0, 4.1)])["verdict"]
    assert not v["decided"] and v["class"] is None
    v = validation([out(1.0, 2.4)])["verdict"]
    assert not v["decided"] and v["missing"] == [0.5, 2.0]


def test_dist_dgl_alone_at_another_f_is_set_against_lsm_gnn_whose_epoch_does_not_depend_on_f():
    from lsm_gnn.bench.validate import validation

    assert charges("distdgl", "host") and not charges("lsm", "host")
    both = _distdgl_output(64, 30.0, {})
    both["systems"]["lsm"] = {"epoch_steady_s": {"median": 10.0, "min": 9.5, "max": 10.5, "spread": 0.1, "runs": 3},
                              "spread": 0.1}
    both.update({"host_speed": 1.0, "distdgl_vs_lsm_epoch": 3.0})
    alone = []
    for f, e in ((0.5, 20.0), (2.0, 50.0)):
        o = _distdgl_output(64, e, {})
        o["systems"]["distdgl"]["epoch_steady_s"].update({"min": 0.9 * e, "max": 1.1 * e})
        o.update({"host_speed": f, "source": f"f={f:g}"})
        alone.append(o)
    v = validation([both, *alone])["verdict"]
    half, two = v["by_host_speed"]["0.5"], v["by_host_speed"]["2"]
    assert half["ratio"] == pytest.approx(2.0) and half["class"] == "between 1 and 3.75"
    assert (half["min"], half["max"]) == (pytest.approx(18.0 / 10.5), pytest.approx(22.0 / 9.5))
    assert two["ratio"] == pytest.approx(5.0) and two["class"] == ">= 3.75" and "no stage charged" in two["source"]
    assert not v["decided"] and v["missing"] == []


def test_the_per_round_ratio_takes_only_rounds_where_both_runs_are_valid():
    from lsm_gnn.bench.replicate import per_round_ratios

    runs = {"lsm": [{"round": "r0", "epoch_steady_s": 1.0}, {"round": "r1", "epoch_steady_s": 1.0, "valid": False},
                    {"round": "r2", "epoch_steady_s": 1.0}],
            "distdgl": [{"round": "r0", "epoch_steady_s": 3.0}, {"round": "r1", "epoch_steady_s": 9.0},
                        {"round": "r2", "epoch_steady_s": 5.0, "valid": False}]}
    out = per_round_ratios(runs)
    assert out["distdgl"]["values"] == [3.0] and out["distdgl"]["runs"] == 1


def test_a_system_whose_gpu_work_outruns_its_charge_gets_its_own_scale_raised_or_refused(monkeypatch):
    from lsm_gnn.bench import compare as bench
    from lsm_gnn.config import load_config
    from lsm_gnn.utils.errors import ConfigError

    cfg = load_config(None, ["storage.device=emulated", "storage.device_profile=paper", "emulation.time_scale=64"])

    def fake_run(ok_from, kind="scale"):
        def run_system(system, c, **kw):  # the record a run writes: its testbed's gpu part
            ok = c.emulation.time_scale >= ok_from
            assert (c.train.epochs, c.train.warmup_iters, c.train.timed_iters) == (1, *bench.SYSTEM_PROBE_ITERS)
            part = {"valid": ok, "late_fraction": 0.0 if ok else 0.3, "cause": None if ok else kind}
            return {"metrics": {"testbed": {"parts": {"gpu": part}, "invalid_causes": [] if ok else ["gpu late"]}}}
        return run_system

    import baselines.harness as harness

    monkeypatch.setattr(harness, "run_system", fake_run(256))
    got = bench.choose_system_scale(cfg, "lsm", 64, given=False, devices=2, machines=2, trainers=2)
    assert got["time_scale"] == 256 and got["raised"] and [p["time_scale"] for p in got["probes"]] == [64, 128, 256]
    assert got["probes"][0]["late_fraction"] == {"gpu": 0.3} and got["probes"][0]["cause_kind"] == "scale"
    with pytest.raises(ConfigError, match="scale 64 is too small for lsm's GPU-charged work.*--system-scale lsm=S"):
        bench.choose_system_scale(cfg, "lsm", 64, given=True, devices=2, machines=2, trainers=2)
    monkeypatch.setattr(harness, "run_system", fake_run(1e9))
    with pytest.raises(ConfigError, match="no scale up to 512 passed"):
        bench.choose_system_scale(cfg, "lsm", 64, given=False, devices=2, machines=2, trainers=2)
    monkeypatch.setattr(harness, "run_system", fake_run(1e9, kind="busy"))
    with pytest.raises(ConfigError, match="because the machine is busy"):
        bench.choose_system_scale(cfg, "lsm", 64, given=False, devices=2, machines=2, trainers=2)


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores to keep one busy")
def test_the_busy_process_spins_on_the_last_core_and_the_primitive_keeps_to_the_others_until_it_ends():
    import lsm_gnn.bench.validate as v

    before = os.sched_getaffinity(0)
    last = max(before)
    with v.busy_core(pin_caller=True) as pid:
        assert os.sched_getaffinity(pid) == {last}
        assert os.sched_getaffinity(0) == before - {last}
        state = open(f"/proc/{pid}/stat").read().split(") ")[1].split()[0]
        assert state == "R"   # entered once it spins, not while its interpreter starts
    assert os.sched_getaffinity(0) == before
    with v.busy_core() as pid:   # bench compare --busy-core: only the busy process is pinned
        assert os.sched_getaffinity(pid) == {last} and os.sched_getaffinity(0) == before
