"""The storage device model and the emulated storage device: Little's law in its three regimes,
the virtual clock, the paper's striping, real rows (checksums), pacing decided against an injected
clock, one clock shared by two processes, lateness flagged, config errors, the time scale."""

from __future__ import annotations

import multiprocessing as mp
import os

import numpy as np
import pytest

from conftest import _build_random_dataset
from lsm_gnn.config import StorageConfig, load_config
from lsm_gnn.storage.device_model import (PACKAGED, ClockState, DeviceProfile, SSDModel, device_reads_seconds,
                                          load_device_profile, read_pages, reads_seconds, schedule, stripe)
from lsm_gnn.storage.emulated import (CLOCK_ENV, LATENESS_LIMIT, EmulatedDevice, device_clock_env,
                                      emulation_summary, open_emulated, shared_clock_path,
                                      timed_window_begin, timed_window_end, timed_windows_reset)
from lsm_gnn.utils.errors import ConfigError, DataError, InputError

SSD = SSDModel(iops=100_000, bandwidth=200e6, latency_s=100e-6, max_queue_depth=64)
# caps: latency bound below QD 10 (QD / 100 us), IOPS 100k from QD 10, bandwidth at 200 MB/s / 4 KiB = 48.8k


def test_throughput_follows_littles_law_in_each_regime():
    assert SSD.throughput(1) == pytest.approx(10_000) and SSD.regime(1, 512) == "latency"
    assert SSD.throughput(5, 512) == pytest.approx(50_000)
    assert SSD.throughput(32, 512) == pytest.approx(100_000) and SSD.regime(32, 512) == "iops"
    assert SSD.throughput(32, 8192) == pytest.approx(200e6 / 8192) and SSD.regime(32, 8192) == "bandwidth"
    slow = SSDModel(iops=1e9, bandwidth=1e15, latency_s=1e-3, max_queue_depth=4)
    assert slow.throughput(1024) == pytest.approx(4 / 1e-3)  # the SSD serves at most 4 at once


def test_a_time_scale_divides_the_rates_and_multiplies_the_latency():
    s = SSD.scaled(4.0)
    assert (s.iops, s.bandwidth, s.latency_s) == pytest.approx((25_000, 50e6, 400e-6))
    for q in (1, 4, 16, 64):
        assert s.throughput(q) == pytest.approx(SSD.throughput(q) / 4)


def test_the_virtual_clock_completes_a_closed_loop_at_the_formulas_rate():
    for q in (1, 2, 4, 8, 16, 64, 256):
        n = 64 * q
        st = ClockState(1, SSD.max_queue_depth)
        done = schedule(st, SSD, np.zeros(n, np.int64), 0, q, nbytes=512)
        achieved = n / (done.max() * 1e-9)
        # the first and last reads of a batch fill and drain the queue: at most one latency of n
        assert achieved == pytest.approx(SSD.throughput(q, 512), rel=0.03), q


def test_the_clock_is_nvmevirts_start_max_submit_free_and_done_start_plus_latency():
    ssd = SSDModel(iops=1e4, bandwidth=1e12, latency_s=300e-6)  # occupancy 100 us, 200 us more to done
    st = ClockState(2, None)
    done = schedule(st, ssd, np.array([0, 0, 1]), 1_000_000, 8)
    assert done.tolist() == [1_300_000, 1_400_000, 1_300_000]
    assert st.free.tolist() == [1_200_000, 1_100_000]
    # a later batch submitted before SSD 0 is free waits for it
    assert schedule(st, ssd, np.array([0]), 1_150_000, 8).tolist() == [1_500_000]


def test_pages_are_striped_as_the_paper_does():
    # owner g's file holds node v at line v // G; line p is on SSD p % n (GIDS: cl_id % n_ctrls)
    G, n = 2, 2
    nodes = np.array([0, 2, 4, 6, 8])  # owner 0's nodes
    assert stripe(nodes // G, n).tolist() == [0, 1, 0, 1, 0]
    # a merged read of 3 pages is 3 commands (BaM: one per page)
    assert read_pages(np.array([0, 4096 * 10]), np.array([3 * 4096, 4096])).tolist() == [0, 1, 2, 10]


def test_reads_seconds_is_the_projections_formula():
    t, which = reads_seconds(SSD, 1000, 1000 * 4096, ssds=2, queue_depth=8, sharers=2)
    assert t == pytest.approx(max(2 * 1000 / (2 * 1e5), 2 * 4096e3 / (2 * 200e6), 1000 * 100e-6 / 8))
    assert which == "bandwidth"
    prof = DeviceProfile(name="x", ssd=SSD, ssds_per_device=2, shared=True)
    assert device_reads_seconds(prof, 1000, 4096e3, devices=2, queue_depth=8)[0] == pytest.approx(t)


def test_every_packaged_device_profile_loads_and_states_its_sources():
    for name in PACKAGED:
        p = load_device_profile(name)
        assert p.name == name and p.ssd.iops > 0
    paper = load_device_profile("paper")
    assert (paper.ssds_per_device, paper.shared, paper.devices) == (2, False, 2)
    # 2 x 980 Pro: BaM measured 1.52 M 4 KiB reads/s
    assert 2 * paper.ssd.iops == pytest.approx(1.52e6)


def test_a_bad_device_profile_names_the_file_and_key(tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text("name: bad\nssds_per_device: 2\nssd: {iops: -1, bandwidth: 1, latency_s: 0}\n")
    with pytest.raises(ConfigError, match=r"bad.yaml.*ssd.iops"):
        load_device_profile(f)


def test_the_config_validates_the_device_keys():
    cfg = load_config(None, ["storage.device=emulated", "storage.device_profile=optane", "emulation.time_scale=2"])
    assert (cfg.storage.device, cfg.storage.device_profile, cfg.emulation.time_scale) == ("emulated", "optane", 2.0)
    with pytest.raises(ConfigError, match="storage.device_profile"):
        load_config(None, ["storage.device_profile=nvme9000"])
    with pytest.raises(ConfigError, match="storage.device"):
        load_config(None, ["storage.device=fast"])
    with pytest.raises(ConfigError, match="emulation.time_scale"):
        load_config(None, ["emulation.time_scale=0"])


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    return _build_random_dataset(tmp_path_factory.mktemp("emu") / "d", num_nodes=600, avg_degree=2, dim=1024, seed=3)


class FakeClock:
    """A clock the test moves: the store's waits jump it to the deadline (no wall time passes)."""

    def __init__(self, start=10_000_000, copy_ns=0, late_ns=0):
        self.now, self.copy_ns, self.late_ns = start, copy_ns, late_ns
        self.waited = []

    def __call__(self):
        return self.now

    def wait(self, deadline):
        self.waited.append(deadline)
        self.now = max(self.now, deadline) + self.late_ns
        return self.now


def _emulated(ds, clock, profile=None, **cfg):
    prof = profile or DeviceProfile(name="t", ssd=SSD, ssds_per_device=2)
    return open_emulated(ds.features(), StorageConfig(device="emulated", **cfg), profile=prof, clock=clock,
                         wait=clock.wait)


def test_the_emulator_returns_exactly_the_real_rows_and_checks_their_checksums(ds):
    truth = np.array(ds.feature_array())
    clock = FakeClock()
    with _emulated(ds, clock) as store:
        ids = np.random.default_rng(1).integers(0, 600, 300)
        np.testing.assert_array_equal(store.read_rows(ids), truth[ids])
        assert store.checksum_state == "verified" and store.path_info["device"] == "emulated"
        assert store.path_info["resident_fraction"] == pytest.approx(1.0)
        # a woken reader thread must not wait 5 ms for the GIL (emulated.SWITCH_INTERVAL_S)
        assert store.path_info["switch_interval_s"] <= 0.0005
        store.row_checksums = store.row_checksums.copy()
        store.row_checksums[ids[0]] ^= 1
        with pytest.raises(DataError, match="checksum"):
            store.read_rows(ids[:1])


def test_a_batch_is_handed_back_exactly_when_the_model_completes_its_last_read(ds):
    clock = FakeClock()
    with _emulated(ds, clock, queue_depth=4) as store:
        ids = np.arange(0, 600, 3)[:40]  # 40 distinct pages, never adjacent: 40 reads
        store.read_rows(ids)
        # pages striped over 2 SSDs, 4 in flight: latency bound at 4 / 100 us = 40k reads/s
        expect = ClockState(2, SSD.max_queue_depth)
        done = schedule(expect, SSD, stripe(ids, 2), 10_000_000, 4)
        assert clock.waited == [int(done.max())]
        s = store.emulation_stats()
        assert s["reads"] == 40 and s["lateness_s"] == 0 and s["valid"]
        assert s["storage_s"] == pytest.approx((done.max() - 10_000_000) * 1e-9)
        # the next batch starts where this one left the clock: no overshoot carried over
        clock.now += 5_000_000
        submit = clock.now
        store.read_rows(ids)
        done2 = schedule(expect, SSD, stripe(ids, 2), submit, 4)
        assert done2.max() - submit == done.max() - 10_000_000
        assert clock.waited[-1] == int(done2.max())


def test_lateness_past_one_percent_of_the_storage_time_makes_the_run_invalid(ds):
    on_time, late = FakeClock(late_ns=0), FakeClock(late_ns=50_000)
    with _emulated(ds, on_time) as a, _emulated(ds, late) as b:
        for s in (a, b):
            for k in range(3):
                s.read_rows(np.arange(k, 600, 7))
        ok, bad = a.emulation_stats(), b.emulation_stats()
    assert ok["valid"] and ok["invalid_cause"] is None
    assert bad["lateness_s"] == pytest.approx(3 * 50e-6)
    assert bad["lateness_fraction"] > LATENESS_LIMIT and not bad["valid"] and "late" in bad["invalid_cause"]
    both = emulation_summary([ok["raw"][0], bad["raw"][0]], 1.0)
    assert both["lateness_s"] == pytest.approx(bad["lateness_s"]) and both["batches"] == 6


class SlowCopyClock(FakeClock):
    """A FakeClock whose copy takes `copy_ns`: the store reads the clock at submission and after the
    copy, so every second reading is `copy_ns` later."""

    def __init__(self, copy_ns, **kw):
        super().__init__(copy_ns=copy_ns, **kw)
        self.calls = 0

    def __call__(self):
        self.calls += 1
        if self.calls % 2 == 0:
            self.now += self.copy_ns
        return self.now


def test_only_batches_handed_back_inside_the_timed_window_decide_validity(ds):
    clock = FakeClock(late_ns=50_000)
    try:
        with _emulated(ds, clock) as store:
            for k in range(3):  # warm-up: late, outside the window
                store.read_rows(np.arange(k, 600, 7))
            clock.late_ns = 0
            timed_window_begin(clock.now)
            for k in range(3):
                store.read_rows(np.arange(k, 600, 7))
            timed_window_end(clock.now)
            st = store.emulation_stats()
    finally:
        timed_windows_reset()
    assert st["window"] == "timed" and st["batches"] == 3 and st["lateness_s"] == 0 and st["valid"]
    every = st["raw"][0]["all_batches"]
    assert every["batches"] == 6 and every["late_ns"] == 3 * 50_000
    # the latest batches are named by their index in the run (the warm-up's, here)
    assert {b[0] for b in every["worst_batches"][:3]} == {0, 1, 2}


def test_without_a_timed_window_every_batch_decides_validity(ds):
    timed_windows_reset()
    clock = FakeClock(late_ns=50_000)
    with _emulated(ds, clock) as store:
        for k in range(3):
            store.read_rows(np.arange(k, 600, 7))
        st = store.emulation_stats()
    assert st["window"] == "all" and st["batches"] == 3 and st["lateness_s"] == pytest.approx(150e-6)


def test_a_copy_slower_than_the_model_is_its_overshoot_and_keeps_the_run_invalid(ds):
    timed_windows_reset()
    slow = SlowCopyClock(copy_ns=5_000_000)  # 5 ms per batch: far beyond the model's ~0.2 ms
    with _emulated(ds, slow) as store:
        for k in range(3):
            store.read_rows(np.arange(k, 600, 7))
        st = store.emulation_stats()
    raw = st["raw"][0]
    assert not st["valid"] and st["copy_late_batches"] == 3
    # the whole lateness is the copy's: it ended after the deadline and the wait returned at once
    assert raw["copy_over_ns"] == raw["late_ns"] and raw["wake_late_ns"] == 0
    assert st["copy_over_s"] == pytest.approx(st["lateness_s"])
    assert "of which the copy's overshoot 0.0" in st["invalid_cause"] and not st["valid"]


def test_the_copys_time_off_the_cpu_is_its_wall_time_less_its_threads_cpu_time(ds):
    timed_windows_reset()
    slow = SlowCopyClock(copy_ns=5_000_000)  # the fake clock's 5 ms pass without any CPU work
    with _emulated(ds, slow) as store:
        store.read_rows(np.arange(0, 600, 7))
        raw = store.emulation_stats()["raw"][0]
    # the real copy took well under 5 ms of CPU: nearly all of the copy's 5 ms was off the CPU
    assert 4_000_000 < raw["copy_off_cpu_ns"] <= 5_000_000
    assert raw["copy_off_cpu_late_ns"] == raw["copy_off_cpu_ns"]  # the batch was late
    assert len(raw["worst_batches"][0]) == 4 and raw["worst_batches"][0][3] == raw["copy_off_cpu_ns"]


def test_a_starved_copy_is_named_as_the_machines_load(ds):
    raw = {"batches": 10, "reads": 100, "storage_ns": 1_000_000_000, "late_ns": 20_000_000, "late_p99_ns": 3e6,
           "late_max_ns": 4_000_000, "copy_ns": 5, "copy_late_batches": 4, "copy_over_ns": 20_000_000,
           "copy_off_cpu_ns": 40_000_000, "copy_off_cpu_late_ns": 15_000_000, "window": "timed"}
    st = emulation_summary([raw], 8.0)
    assert not st["valid"] and st["copy_off_cpu_late_s"] == pytest.approx(0.015) and st["window"] == "timed"
    assert "other work held the CPU" in st["invalid_cause"]
    # off the CPU mostly in batches that were on time: the late ones' copy was the CPU's own work
    busy = emulation_summary([{**raw, "copy_off_cpu_late_ns": 2_000_000}], 8.0)
    assert "the real copy from the page cache alone took longer" in busy["invalid_cause"]


def test_time_scale_stretches_the_models_time_by_s(ds):
    times = {}
    for S in (1.0, 3.0):
        clock = FakeClock()
        prof = DeviceProfile(name="t", ssd=SSD, ssds_per_device=1)
        dev = EmulatedDevice(prof, S)
        with open_emulated(ds.features(), StorageConfig(device="emulated"), profile=prof, clock=clock,
                           wait=clock.wait, time_scale=S) as store:
            assert store.device.ssd.iops == pytest.approx(SSD.iops / S)
            store.read_rows(np.arange(0, 600, 2))
            st = store.emulation_stats()
            times[S] = st["storage_s"]
            assert st["storage_s_emulated"] == pytest.approx(st["storage_s"] / S)
        dev.close()
    assert times[3.0] == pytest.approx(3 * times[1.0], rel=1e-6)


def test_the_emulated_device_serves_only_the_block_readers(ds):
    with pytest.raises(InputError, match="storage.reader 'mmap'"):
        open_emulated(ds.features(), StorageConfig(device="emulated", reader="mmap"))
    from lsm_gnn.storage import open_from_config

    with open_from_config(ds.features(), StorageConfig(device="emulated", reader="mmap")) as store:
        assert store.path_info["device"].startswith("real")


def _child(path, q):
    prof = DeviceProfile(name="s", ssd=SSDModel(iops=1e4, bandwidth=1e12, latency_s=100e-6), ssds_per_device=1,
                         shared=True)
    dev = EmulatedDevice(prof, 1.0, shared_path=path)
    q.put(dev.submit(np.zeros(5, np.int64), 0, 1).tolist())
    dev.close()


def test_two_processes_pace_against_one_shared_clock(tmp_path):
    prof = DeviceProfile(name="s", ssd=SSDModel(iops=1e4, bandwidth=1e12, latency_s=100e-6), ssds_per_device=1,
                         shared=True)
    with device_clock_env() as folder:
        assert os.environ[CLOCK_ENV] == folder
        path = shared_clock_path(prof, 1.0)
        ctx = mp.get_context("spawn")
        q = ctx.Queue()
        p = ctx.Process(target=_child, args=(path, q))
        p.start()
        theirs = q.get(timeout=60)
        p.join(60)
        mine = EmulatedDevice(prof, 1.0, shared_path=path)
        ours = mine.submit(np.zeros(5, np.int64), 0, 1).tolist()
        mine.close()
    # the other process's 5 reads occupied the SSD first: ours queue behind them (100 us each)
    assert theirs == [100_000 * (i + 1) for i in range(5)]
    assert ours == [100_000 * (i + 6) for i in range(5)]
    assert CLOCK_ENV not in os.environ or os.environ[CLOCK_ENV] != folder
    assert not os.path.exists(folder)   # the run's clock folder goes with it (the Dist-DGL leak check relies on it)


def test_ssds_of_each_device_have_no_shared_clock():
    prof = load_device_profile("paper")
    with device_clock_env():
        assert shared_clock_path(prof, 1.0) is None
        assert shared_clock_path(load_device_profile("vm"), 1.0) is not None


def test_the_projection_and_the_floor_take_the_storage_time_from_the_same_model():
    from lsm_gnn.bench.compare import lsm_floor
    from lsm_gnn.project.counts import Counts
    from lsm_gnn.project.model import _ssd_floor, _storage
    from lsm_gnn.project.profiles import load_profile

    p = load_profile("paper")
    st = p.storage
    dev = DeviceProfile(name="same", ssd=SSDModel(iops=st.ssd_iops, bandwidth=st.ssd_bandwidth, latency_s=st.latency_s),
                        ssds_per_device=int(st.ssds_per_device), shared=st.shared)
    pages, G = 5000.0, 2
    c = Counts(system="lsm", workers=G)
    projected = _storage(c, p, pages, pages * 4096, st.queue_depth).seconds
    floor = lsm_floor({"busy_s_per_iteration": 0.0, "storage_bytes_per_iteration": pages * 4096 * G,
                       "iterations_per_epoch": 1}, {}, G, device=dev, queue_depth=st.queue_depth)
    assert floor["storage_s"] == pytest.approx(projected, rel=1e-12)
    assert floor["storage_s"] == pytest.approx(device_reads_seconds(dev, pages, pages * 4096, devices=G,
                                                                    queue_depth=st.queue_depth)[0])
    # a shared pool: the projection's floor is the model's caps with every worker reading
    shared = p.model_copy(update={"storage": st.model_copy(update={"shared": True})})
    assert _ssd_floor(c, shared, pages, pages * 4096)["seconds"] == pytest.approx(
        reads_seconds(dev.ssd, pages, pages * 4096, ssds=st.ssds_per_device, sharers=G)[0])


def test_the_real_disk_floor_is_unchanged_all_reads_over_fios_best_iops():
    from lsm_gnn.bench.compare import lsm_floor

    f = lsm_floor({"busy_s_per_iteration": 0.01, "storage_io_ops_per_iteration": 2000, "iterations_per_epoch": 100},
                  {"fio": {"best_iops": 1e5}}, 2)
    assert f["storage_s"] == pytest.approx(2000 / 1e5) and f["epoch_s"] == pytest.approx(2.0)


def _record_at(S, steady, per_it, samples):
    from lsm_gnn.records import emulation_block

    rec = {"metrics": {"time": {"epoch_steady_s": steady, "epoch_cold_s": steady, "per_iteration": per_it,
                                "per_iteration_wall": sum(per_it.values())},
                       "throughput": {"samples_per_s": samples}}}
    rec["metrics"]["emulation"] = emulation_block(rec, S, cpu_s=30.0, wall_s=20.0)
    return rec


def test_a_dilated_runs_times_are_divided_back_by_its_scale_and_labelled():
    from lsm_gnn.bench.replicate import summarise_run

    rec = _record_at(4.0, 400.0, {"train": 0.08, "fetch_storage": 0.04}, 250.0)
    e = rec["metrics"]["emulation"]
    assert e["label"] == "emulated at scale 4" and e["time_scale"] == 4.0
    assert e["epoch_steady_s"] == pytest.approx(100.0) and e["per_iteration"]["train"] == pytest.approx(0.02)
    assert e["samples_per_s"] == pytest.approx(1000.0) and e["cpu_share"] == pytest.approx(1.5) and e["valid"]
    rec["metrics"].update({"rows": {}, "traffic": {}, "accelerator": {"busy_s": 8.0, "iterations": 100},
                           "time": {**rec["metrics"]["time"], "timing_window": {"iterations_per_epoch": 10}}})
    run = summarise_run(rec)
    assert run["epoch_steady_s"] == pytest.approx(100.0) and run["per_iteration"]["fetch_storage"] == pytest.approx(0.01)
    assert run["busy_s_per_iteration"] == pytest.approx(0.02) and run["samples_per_s"] == pytest.approx(1000.0)


def test_late_pacing_marks_the_record_invalid_with_its_cause():
    from lsm_gnn.records import emulation_block, storage_block

    raw = {"batches": 10, "reads": 100, "storage_ns": 1_000_000_000, "late_ns": 20_000_000, "late_p99_ns": 3e6,
           "late_max_ns": 4_000_000, "copy_ns": 5, "copy_late_batches": 4}
    rec = {"metrics": {"time": {"epoch_steady_s": 10.0}, "source": {"emulation_per_rank": [raw, raw]}}}
    rec["metrics"]["storage"] = storage_block(rec, "emulated", {"profile": "paper"}, 1.0)
    emu = rec["metrics"]["storage"]["emulation"]
    assert emu["lateness_fraction"] == pytest.approx(0.02) and emu["storage_s"] == pytest.approx(2.0)
    assert not emu["valid"] and "raise emulation.time_scale" in emu["invalid_cause"]
    block = emulation_block(rec, 1.0, None, None)
    assert block["valid"] is False and block["invalid_causes"] == [emu["invalid_cause"]]


def _output(device, profile, S, medians, spread=0.01):
    return {"benchmark": "compare", "storage_device": device, "storage_profile": profile, "time_scale": S,
            "accelerator": {"profile": "a100", "scale": 1.0},
            "systems": {s: {"epoch_steady_s": {"median": m, "runs": 5, "spread": spread}, "spread": spread}
                        for s, m in medians.items()}}


def test_the_validation_checks_replication_dilation_and_the_emulator_against_the_real_disk(tmp_path):
    import json

    from lsm_gnn.bench.validate import load_outputs, validation

    paper1 = _output("emulated", "paper", 1.0, {"lsm": 100.0, "direct": 200.0})
    paper2 = _output("emulated", "paper", 2.0, {"lsm": 104.0, "direct": 188.0}, spread=0.07)
    vm = _output("emulated", "vm", 1.0, {"lsm": 300.0, "direct": 330.0})
    real = _output("real", None, 1.0, {"lsm": 290.0, "direct": 360.0})
    v = validation([paper1])
    assert v["replication"]["ok"] and v["dilation"] is None and v["emulator_vs_real"] is None
    paths = []
    for i, o in enumerate((paper2, vm, real)):
        paths.append(tmp_path / f"o{i}.json")
        paths[-1].write_text(json.dumps(o))
    v = validation([paper1, *load_outputs(paths)])
    d = v["dilation"]
    assert d["time_scales"] == [1.0, 2.0] and d["difference"]["lsm"] == pytest.approx(0.04)
    assert d["difference"]["direct"] == pytest.approx(-0.06) and d["ok"] is False
    e = v["emulator_vs_real"]
    assert e["error"]["lsm"] == pytest.approx(300 / 290 - 1) and e["error"]["direct"] == pytest.approx(330 / 360 - 1)
    assert e["ok"] is True and e["source"] == [str(paths[1]), str(paths[2])]
    assert v["replication"]["ok"] is False  # paper2's 7 % spread
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    with pytest.raises(InputError, match="bad.json: not a bench compare output"):
        load_outputs([bad])


def test_the_queue_depth_sweep_reports_the_models_formula_and_the_pages_it_read(ds):
    from lsm_gnn.bench.device import sweep

    res = sweep(ds, "optane", [1, 4], time_scale=50.0, min_reads=64, batches=1)
    ssd = load_device_profile("optane").ssd
    for p in res["points"]:
        assert p["model_iops"] == pytest.approx(ssd.throughput(p["queue_depth"]))
        assert p["reads"] == 64 * p["queue_depth"] and p["met"] == (abs(p["ratio"] - 1) <= 0.03)
    assert res["target"] == 0.03 and res["met"] == all(p["met"] for p in res["points"])


def test_bench_compare_on_an_emulated_device_reports_its_profile_scale_spread_and_validation(monkeypatch, tmp_path):
    import baselines.harness
    from lsm_gnn.bench import compare as bench
    from lsm_gnn.datasets.synthetic import generate
    from lsm_gnn.records import emulation_block

    seen, dropped = [], []

    def fake_run(system, cfg, **kw):
        seen.append((system, cfg.storage.device, cfg.storage.device_profile, cfg.emulation.time_scale))
        S = cfg.emulation.time_scale
        rec = {"system": system, "epochs": [{}, {}], "metrics": {
            "time": {"epoch_steady_s": 10.0 * S, "per_iteration": {"train": 0.01 * S},
                     "timing_window": {"warmup_iters": 1, "timed_iters": 5, "iterations_run_per_epoch": 6,
                                       "iterations_per_epoch": 100}},
            "accelerator": {"au": 0.9, "busy_s": 0.01 * S * 10, "iterations": 10},
            "rows": {}, "traffic": {"storage_io_ops": 40, "storage_bytes": 40 * 4096}}}
        rec["metrics"]["emulation"] = emulation_block(rec, S, 5.0, 10.0)
        return rec

    monkeypatch.setattr(baselines.harness, "run_system", fake_run)
    import lsm_gnn.storage.pagecache as pc

    monkeypatch.setattr(pc, "drop_file_cache", lambda p: dropped.append(p))
    monkeypatch.setattr(bench, "fio_limit", lambda cfg, **kw: {"available": True, "best_iops": 9e4, "best_depth": 64})
    # the IOPS cap is the median of the disk probes, not fio's best moment (9e4)
    probes = iter([6e4, 4e4, 5e4])
    monkeypatch.setattr(bench, "disk_probe", lambda cfg, **kw: next(probes))
    import lsm_gnn.bench.storage as sb

    monkeypatch.setattr(sb, "run_fio", lambda fio, path, size, seconds, job: {
        "available": True, "lat_s": 8e-5, "bw_bytes_per_s": 5e8, "iops": 1.0})
    generate(tmp_path / "ds", 200, feature_dim=4, seed=0, progress=False)
    cfg = load_config(None, [f"dataset.path={tmp_path / 'ds'}", "train.accelerator=emulated",
                             "storage.device=emulated", "storage.device_profile=vm", "emulation.time_scale=4"])
    res = bench.compare(cfg, systems=["lsm", "mmap"], repeats=2, limits=False, records_dir=str(tmp_path),
                        probe_scale=False, check_primitive=False)
    # the vm profile was filled from fio now and every run read it
    m = res["storage_profile_measured"]
    assert m["ssd"] == {"iops": 5e4, "bandwidth": 5e8, "latency_s": 8e-5, "max_queue_depth": None}
    assert m["measured"]["probes_iops"] == [6e4, 4e4, 5e4] and m["measured"]["random"]["best_iops"] == 9e4
    assert {p for _, _, p, _ in seen} == {m["path"]} and load_device_profile(m["path"]).ssd.iops == 5e4
    assert res["storage_profile"] == "vm" and res["time_scale"] == 4.0 and res["time_label"] == "emulated at scale 4"
    # times divided back by S; each system's spread; the validation of this output alone
    assert res["systems"]["lsm"]["epoch_steady_s"]["median"] == pytest.approx(10.0)
    assert res["systems"]["lsm"]["spread"] == 0.0 and res["validation"]["replication"]["ok"]
    # only the run that does not read through the emulated device (mmap) starts with the file dropped
    assert len(dropped) == 2 + 2  # fio's drops (qd1, sequential) + mmap's two runs


def test_the_training_loop_judges_the_pacing_on_its_timed_iterations(ds):
    from lsm_gnn.train.loop import run_training

    cfg = load_config(None, {"dataset.path": str(ds.root), "storage.reader": "direct", "storage.device": "emulated",
                             "storage.device_profile": "optane", "cache.enabled": False,
                             "sampler.batch_size": 32, "sampler.fanouts": [2, 2], "train.accelerator": "emulated",
                             "train.epochs": 2, "train.warmup_iters": 2, "train.timed_iters": 3,
                             "train.eval": False, "train.threads": 1,
                             # no fetch ahead of the step: each iteration's rows are read inside it
                             "train.overlap_fetch": False, "sampler.prefetch_batches": 0})
    rec = run_training(cfg, progress=False)
    emu = rec["metrics"]["source"]["storage_path"]["emulation"]
    raw = emu["raw"][0]
    # every batch of the run is in all_batches; validity reads those handed back in the timed
    # iterations (3 per epoch)
    assert raw["all_batches"]["batches"] == 2 * (2 + 3)
    assert emu["window"] == "timed" and emu["batches"] == 2 * 3
    # `lsm-gnn train`'s own record (run_training, one process) says which device it read and its time
    # scale, as the harness's records do: metrics.storage and metrics.emulation
    m = rec["metrics"]
    assert m["storage"]["device"] == "emulated" and m["storage"]["profile"]["profile"] == "optane"
    assert m["storage"]["emulation"]["batches"] == 2 * 3
    e = m["emulation"]
    assert e["time_scale"] == 1.0 and e["label"] == "emulated at scale 1"
    assert e["epoch_steady_s"] == pytest.approx(m["time"]["epoch_steady_s"])
    assert e["cpu_s"] > 0 and e["wall_s"] > 0 and e["cpu_share"] == pytest.approx(e["cpu_s"] / e["wall_s"])
    assert e["valid"] == m["storage"]["emulation"]["valid"]


def test_a_multi_device_launch_writes_the_storage_device_and_time_scale_once_for_the_merged_record(ds, tmp_path):
    from lsm_gnn.ranks.launch import run_multi_device
    from lsm_gnn.records import read_record

    cfg = load_config(None, {"dataset.path": str(ds.root), "storage.reader": "direct", "storage.device": "emulated",
                             "storage.device_profile": "optane", "emulation.time_scale": 4.0,
                             "cache.capacity_fraction": 0.2, "distributed.devices": 2,
                             "sampler.batch_size": 32, "sampler.fanouts": [2, 2], "train.accelerator": "emulated",
                             "train.epochs": 2, "train.warmup_iters": 1, "train.timed_iters": 2,
                             "train.eval": False, "train.threads": 1})
    path = tmp_path / "rec.json"
    run_multi_device(cfg, record_path=path, progress=False)
    m = read_record(path)["metrics"]
    assert m["storage"]["device"] == "emulated" and m["emulation"]["time_scale"] == 4.0
    assert m["emulation"]["label"] == "emulated at scale 4"
    assert m["emulation"]["epoch_steady_s"] == pytest.approx(m["time"]["epoch_steady_s"] / 4.0)
    assert m["emulation"]["cpu_s"] > 0  # both ranks' CPU: the launcher's reaped children


def test_a_scale_too_small_is_raised_before_the_runs_or_refused_when_given_and_a_busy_machine_is_refused(
        monkeypatch, tmp_path):
    from lsm_gnn.bench import compare as bench
    from lsm_gnn.utils.errors import ConfigError

    def probe(ok_from, kind="scale"):
        def f(cfg, S, f_, **kw):
            ok = S >= ok_from
            return {"time_scale": S, "ok": ok, "cause_kind": None if ok else kind, "reason": None if ok else "late"}
        return f

    cfg = load_config(None, ["storage.device=emulated", "storage.device_profile=paper", "emulation.time_scale=1"])
    monkeypatch.setattr(bench, "scale_probe", probe(16))
    got = bench.choose_scale(cfg, given=False, host_speed=1.0)
    assert got["time_scale"] == 16 and got["raised"] and [p["time_scale"] for p in got["probes"]] == [1, 2, 4, 8, 16]
    with pytest.raises(ConfigError, match="scale 1 is too small for storage profile 'paper'.*raise --time-scale"):
        bench.choose_scale(cfg, given=True, host_speed=1.0)
    monkeypatch.setattr(bench, "scale_probe", probe(1e9, kind="busy"))
    with pytest.raises(ConfigError, match="because the machine is busy"):
        bench.choose_scale(cfg, given=False, host_speed=1.0)


def test_the_scale_probe_reads_through_the_emulated_device_and_charges_a_kernel(tmp_path):
    from lsm_gnn.bench.compare import scale_probe
    from lsm_gnn.datasets.synthetic import generate

    generate(tmp_path / "ds", 3000, feature_dim=1024, seed=0, progress=False)
    cfg = load_config(None, [f"dataset.path={tmp_path / 'ds'}", "storage.device=emulated",
                             "storage.device_profile=paper"])
    # a host factor far below 1 cannot be paced at scale 1 whatever the machine: the work outruns its charge
    p = scale_probe(cfg, 1.0, 0.01, rows=512, batches=2)
    assert not p["ok"] and p["cause_kind"] == "scale" and "host:" in p["reason"]


def test_a_comparison_of_systems_that_hold_every_row_in_memory_probes_the_host_charge_only(tmp_path):
    from lsm_gnn.bench.compare import scale_probe
    from lsm_gnn.testbed import charges

    assert charges("lsm", "ssd") and charges("direct", "ssd") and not charges("distdgl", "ssd") and not charges("memory", "ssd")
    # no dataset is opened: the SSD model is not probed (Dist-DGL alone at S = 1, the host ground truth)
    cfg = load_config(None, [f"dataset.path={tmp_path / 'absent'}", "storage.device=emulated",
                             "storage.device_profile=paper"])
    p = scale_probe(cfg, 1.0, 1.0, storage=False)
    assert p["storage_probed"] is False and p["storage_lateness_fraction"] is None
    assert "storage:" not in (p["reason"] or "")
    with pytest.raises(Exception, match="absent"):
        scale_probe(cfg, 1.0, 1.0)


def test_a_system_runs_at_its_own_time_scale_and_the_dilation_check_reads_each_systems_scale(monkeypatch, tmp_path):
    import baselines.harness
    from lsm_gnn.bench import compare as bench
    from lsm_gnn.bench.validate import validation
    from lsm_gnn.datasets.synthetic import generate
    from lsm_gnn.records import emulation_block

    seen = []

    def fake_run(system, cfg, **kw):
        S = cfg.emulation.time_scale
        seen.append((system, S))
        rec = {"system": system, "epochs": [{}, {}], "metrics": {
            "time": {"epoch_steady_s": 10.0 * S, "per_iteration": {"train": 0.01 * S},
                     "timing_window": {"warmup_iters": 1, "timed_iters": 5, "iterations_run_per_epoch": 6,
                                       "iterations_per_epoch": 100}},
            "accelerator": {"au": 0.9, "busy_s": 0.01 * S * 10, "iterations": 10}, "rows": {}, "traffic": {}}}
        rec["metrics"]["emulation"] = emulation_block(rec, S, 5.0, 10.0)
        return rec

    monkeypatch.setattr(baselines.harness, "run_system", fake_run)
    import lsm_gnn.storage.pagecache as pc

    monkeypatch.setattr(pc, "drop_file_cache", lambda p: None)
    generate(tmp_path / "ds", 200, feature_dim=4, seed=0, progress=False)
    outs = []
    for S in (32, 64):
        cfg = load_config(None, [f"dataset.path={tmp_path / 'ds'}", "train.accelerator=emulated",
                                 "storage.device=emulated", "storage.device_profile=paper", f"emulation.time_scale={S}"])
        outs.append(bench.compare(cfg, systems=["lsm", "distdgl"], limits=False, probe_scale=False,
                                  check_primitive=False, system_scales={"distdgl": 8}))
    assert ("distdgl", 8) in seen and ("lsm", 64) in seen and ("distdgl", 64) not in seen
    assert outs[1]["time_scale_by_system"] == {"lsm": 64, "distdgl": 8}
    # Dist-DGL ran at 8 in both outputs: the dilation check speaks for lsm alone
    d = validation(outs)["dilation"]
    assert set(d["difference"]) == {"lsm"} and d["time_scales_by_system"]["lsm"] == [32, 64]
