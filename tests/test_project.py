"""lsm_gnn.project: the projection's arithmetic on hand-computed cases, profile validation, the CLI."""

from __future__ import annotations

import copy
import json

import pytest
import yaml
from click.testing import CliRunner

from lsm_gnn.cli import cli
from lsm_gnn.project.counts import Counts, counts_from_record
from lsm_gnn.project.model import gradient_bytes, project, project_all, ratios, validate
from lsm_gnn.project.profiles import PACKAGED, load_profile, parse_profile
from lsm_gnn.records import validate_record
from lsm_gnn.utils.errors import ConfigError, DataError

GPU = {
    "name": "test-gpu",
    "compute": {"device": "gpu", "devices_per_node": 2, "step": {"row_s": 0.005 / 10000},
                "memory_bandwidth": 1e12, "sample_rows_per_s": 1e7},
    "cpu": {"cores": 16, "cache_row_s": 0.0, "io_cpu_s": 1e-6, "fault_cpu_s": 0.0, "kvstore_row_s": 1e-6,
            "rpc_sample_rows_per_s": 1e7},
    "storage": {"ssds_per_device": 1, "shared": False, "ssd_iops": 1e5, "ssd_bandwidth": 1e9, "latency_s": 1e-4,
                "queue_depth": 100, "gpu_initiated": True},
    "links": {"pcie": {"bandwidth": 1e10, "latency_s": 0.0}, "nvlink": {"bandwidth": 1e11, "latency_s": 0.0},
              "nic": {"bandwidth": 1e9, "latency_s": 0.0}, "exchange": None,
              "host_memory": {"bandwidth": 1e10, "latency_s": 0.0}},
}

CPU = {
    "name": "test-cpu",
    "compute": {"device": "cpu", "devices_per_node": 2, "step": {"row_s": 0.1 / 10000},
                "sample_rows_per_s": 1e7},
    "cpu": {"cores": 2, "cache_row_s": 1e-6, "io_cpu_s": 0.0, "fault_cpu_s": 0.0, "kvstore_row_s": 1e-6,
            "rpc_sample_rows_per_s": 1e7},
    "storage": {"ssds_per_device": 1, "shared": True, "ssd_iops": 1e5, "ssd_bandwidth": 1e9, "latency_s": 1e-4,
                "queue_depth": 100},
    "links": {"pcie": {"bandwidth": 1e10}, "nvlink": None, "nic": {"bandwidth": 1e9},
              "exchange": {"bandwidth": 1e9}, "host_memory": {"bandwidth": 1e10}},
}


def gpu(**over):
    d = copy.deepcopy(GPU)
    for k, v in over.items():
        sec, key = k.split("__")
        d[sec][key] = v
    return parse_profile(d, "test-gpu.yaml")


def lsm_counts(**kw):
    base = dict(system="lsm", workers=2, iterations_per_epoch=100, row_bytes=1000, rows=10000, local_hits=4000,
                peer_hits=4900, victim_hits=100, storage_rows=1000, storage_io_ops=1000, storage_bytes=1e6,
                peer_rows=5000, exchange_bytes=5e6)
    base.update(kw)
    return Counts(**base)


# ---- arithmetic ------------------------------------------------------------------------------------
# DDP's all-reduce of lsm_counts' gradient (250-dim rows, hidden 256, 19 classes) over NVLink, 2 workers
AR = 2 * (2 - 1) / 2 * 4 * ((2 * 250 * 256 + 256) + (2 * 256 * 19 + 19)) / 1e11


def test_storage_bound_iteration():
    pr = project(lsm_counts(), gpu())
    # storage = max(1000 / 1e5 = 10 ms, 1e6 / 1e9 = 1 ms, 1000 x 1e-4 / 100 = 1 ms) = 10 ms
    st = pr.stages["serve.storage"]
    assert st["seconds"] == pytest.approx(0.010)
    # fetch lane = exchange_ids 0 + serve 10 ms + exchange_rows 5e6 / 1e11 + reorder 5000 x 1000 / 1e12
    assert pr.lanes["fetch"]["seconds"] == pytest.approx(0.010 + 5e-5 + 5e-6)
    assert pr.lanes["train"]["seconds"] == pytest.approx(0.005 + AR)   # the step, then DDP's all-reduce
    assert pr.lanes["sample"]["seconds"] == pytest.approx(0.001)
    assert pr.lanes["pvp"]["seconds"] == pytest.approx(100 * 1000 / 1e10)
    assert pr.iteration_s == pytest.approx(0.010055)
    assert pr.epoch_s == pytest.approx(0.010055 * 100)
    assert pr.bottleneck == "lane:fetch" and pr.bottleneck_stage == "serve: storage"
    # PCIe carries the storage rows and the victim rows (NVLink the exchange): 1.1e6 B / 1e10
    assert pr.floors["pcie"]["seconds"] == pytest.approx(1.1e6 / 1e10)
    assert pr.hidden_fetch_fraction == pytest.approx((0.005 + AR) / 0.010055)


def test_compute_bound_iteration():
    pr = project(lsm_counts(), gpu(compute__step={"row_s": 0.05 / 10000}))
    assert pr.iteration_s == pytest.approx(0.05 + AR)
    assert pr.bottleneck == "lane:train" and pr.bottleneck_stage == "train"
    assert pr.hidden_fetch_fraction == 1.0
    # the train step scales with the input rows of the batch
    assert project(lsm_counts(rows=20000), gpu(compute__step={"row_s": 0.05 / 10000})).iteration_s == pytest.approx(0.1 + AR)


def test_more_ssds_relieve_storage():
    one = project(lsm_counts(), gpu())
    two = project(lsm_counts(), gpu(storage__ssds_per_device=2))
    assert two.stages["serve.storage"]["seconds"] == pytest.approx(0.005)
    assert two.iteration_s == pytest.approx(0.005055) and two.bottleneck_stage == "serve: storage"
    assert one.iteration_s > two.iteration_s


def test_exchange_over_pcie_without_nvlink():
    d = copy.deepcopy(GPU)
    d["links"]["nvlink"] = None
    pr = project(lsm_counts(), parse_profile(d, "x.yaml"))
    assert pr.stages["exchange_rows"]["seconds"] == pytest.approx(5e6 / 1e10)
    assert pr.stages["exchange_rows"]["resource"] == "pcie"
    assert pr.floors["pcie"]["seconds"] == pytest.approx((1.1e6 + 5e6) / 1e10)


def test_isolated_has_no_exchange():
    pr = project(lsm_counts(system="isolated", exchange_bytes=0, peer_rows=0), gpu())
    assert "exchange_rows" not in pr.stages and pr.iteration_s == pytest.approx(0.010)


def test_overlap_off_serialises_fetch_and_train():
    c = Counts(system="direct", workers=1, iterations_per_epoch=10, row_bytes=1000, rows=10000,
               storage_rows=10000, storage_io_ops=10000, storage_bytes=1e7)
    on = project(c, gpu())
    # storage 10000 / 1e5 = 0.1 s; io_cpu + gather = 10000 x 1e-6 + 1e7 / 1e10 = 0.011; h2d 1e7 / 1e10
    assert on.lanes["fetch"]["seconds"] == pytest.approx(0.1 + 0.001)
    assert on.iteration_s == pytest.approx(0.101)
    c.overlap_fetch = False
    off = project(c, gpu())
    assert set(off.lanes) == {"sample", "fetch+train"}
    assert off.iteration_s == pytest.approx(0.101 + 0.005)


def test_mmap_faults_one_at_a_time():
    c = Counts(system="mmap", workers=1, iterations_per_epoch=10, row_bytes=4096, rows=1000,
               storage_bytes=4096 * 1000, storage_io_ops=1000, overlap_fetch=False)
    pr = project(c, gpu())
    # 1000 faults x 1e-4 s latency at queue depth 1 = 0.1 s, then gather, h2d and the train step
    assert pr.stages["faults"]["seconds"] == pytest.approx(0.1)
    assert pr.bottleneck_stage == "faults"
    assert pr.iteration_s == pytest.approx(0.1 + 2 * 4096 * 1000 / 1e10 + 0.005 * 1000 / 10000)


def test_train_step_is_a_fixed_part_plus_a_part_per_input_row_and_per_edge():
    """fixed_s is paid whatever the batch; row_s and edge_s scale with the batch's rows and edges."""
    c = Counts(system="memory", workers=1, iterations_per_epoch=10, row_bytes=1000, rows=2500)
    assert project(c, gpu()).stages["train"]["seconds"] == pytest.approx(0.005 * 2500 / 10000)
    fixed = gpu(compute__step={"fixed_s": 0.003, "row_s": 2e-7, "edge_s": 1e-8})
    assert "E not recorded" in project(c, fixed).stages["train"]["formula"]
    assert project(c, fixed).stages["train"]["seconds"] == pytest.approx(0.003 + 2e-7 * 2500)
    c.edges = 40000
    assert project(c, fixed).stages["train"]["seconds"] == pytest.approx(0.003 + 2e-7 * 2500 + 1e-8 * 40000)


def test_a_profile_names_an_accelerator_whose_step_is_the_emulated_one_and_may_override_a_constant():
    from lsm_gnn.accelerator import load_accelerator

    d = copy.deepcopy(GPU)
    del d["compute"]["step"], d["compute"]["memory_bandwidth"]
    d["compute"]["accelerator"] = "a100"
    prof = parse_profile(d, "x.yaml")
    a100 = load_accelerator("a100")
    assert prof.compute.step == a100.step and prof.compute.memory_bandwidth == a100.memory_bandwidth
    d["compute"]["step"] = {"fixed_s": 0.001}
    over = parse_profile(d, "x.yaml").compute.step
    assert over.fixed_s == 0.001 and over.row_s == a100.step.row_s and over.edge_s == a100.step.edge_s
    del d["compute"]["step"], d["compute"]["accelerator"]
    with pytest.raises(ConfigError, match="compute.step: required unless compute.accelerator"):
        parse_profile(d, "x.yaml")


def test_mmap_faults_queue_behind_the_other_workers_on_a_shared_ssd():
    """Two workers faulting on one SSD: each fault waits its own latency and one read of the other
    worker (1 / IOPS); the page cache's CPU work per fault comes on top."""
    prof = parse_profile({**copy.deepcopy(CPU), "cpu": {**CPU["cpu"], "fault_cpu_s": 5e-6}}, "test-cpu.yaml")
    c = Counts(system="mmap", workers=2, iterations_per_epoch=10, row_bytes=4096, rows=1000,
               storage_bytes=4096 * 500, storage_io_ops=500, overlap_fetch=False)
    pr = project(c, prof)
    assert pr.stages["faults"]["seconds"] == pytest.approx(500 * (1e-4 + 1 / 1e5))
    assert pr.stages["fault_cpu"]["seconds"] == pytest.approx(500 * 5e-6)
    # one lane per worker (fetch+train), 2 workers on 2 cores: no stretch
    train = 0.1 * 1000 / 10000
    assert pr.contention == 1.0
    allreduce = 2 * (2 - 1) / 2 * gradient_bytes(c) / 1e9   # DDP over gloo (links.exchange)
    assert pr.iteration_s == pytest.approx(500 * (1e-4 + 1e-5 + 5e-6) + 1000 * 4096 / 1e10 + train + allreduce)
    # per-device SSDs: nobody else's reads ahead
    alone = parse_profile({**copy.deepcopy(CPU), "storage": {**CPU["storage"], "shared": False}}, "t.yaml")
    assert project(c, alone).stages["faults"]["seconds"] == pytest.approx(500 * 1e-4)
    # a fault measured the loader's way with 2 processes replaces the composition (page cache included)
    meas = parse_profile({**copy.deepcopy(CPU), "cpu": {**CPU["cpu"], "fault_cpu_s": 5e-6},
                          "storage": {**CPU["storage"], "fault_s": 8e-5, "fault_processes": 2}}, "t.yaml")
    pm = project(c, meas)
    assert pm.stages["faults"]["seconds"] == pytest.approx(500 * 8e-5) and pm.stages["fault_cpu"]["seconds"] == 0
    # ... but not for another number of faulting workers
    c1 = Counts(**{**c.as_dict(), "workers": 1, "fanouts": c.fanouts})
    assert project(c1, meas).stages["faults"]["seconds"] == pytest.approx(500 * 1e-4)
    with pytest.raises(ConfigError, match="storage.fault_s: comes with storage.fault_processes"):
        parse_profile({**copy.deepcopy(CPU), "storage": {**CPU["storage"], "fault_s": 8e-5}}, "t.yaml")


def test_distdgl_sequential_trainer():
    c = Counts(system="distdgl", workers=4, machines=2, iterations_per_epoch=50, row_bytes=1000, rows=10000,
               network_bytes_per_machine=2e7, servers=2)
    pr = project(c, gpu())
    gb = gradient_bytes(c)
    assert gb == 4 * ((2 * 250 * 256 + 256) + (2 * 256 * 19 + 19))
    expected = (10000 / 1e7            # rpc_sample
                + 10000 * 1e-6 + 1e7 / 1e9  # kv_pull: software + remote bytes (2e7 per machine / 2 trainers)
                + 10000 * 1000 / 1e10  # h2d
                + 0.005                # train
                + 1.5 * gb / 1e9)      # ring all-reduce, 2 x (4-1)/4
    assert list(pr.lanes) == ["trainer"]
    assert pr.lanes["trainer"]["stages"] == ["rpc_sample", "kv_pull", "h2d", "train", "straggler", "allreduce"]
    assert pr.iteration_s == pytest.approx(expected)
    assert pr.bottleneck == "lane:trainer" and pr.bottleneck_stage == "kv_pull"
    assert pr.epoch_s == pytest.approx(expected * 50)
    # sampler processes take the RPC sampling off the trainer's path
    c.distdgl_samplers = 1
    assert project(c, gpu()).iteration_s == pytest.approx(expected - 10000 / 1e7)


def test_ratios_between_systems():
    prof = gpu()
    lsm = lsm_counts()
    dd = Counts(system="distdgl", workers=4, machines=2, iterations_per_epoch=50, row_bytes=1000, rows=10000,
                network_bytes_per_machine=2e7, servers=2)
    projs = project_all([lsm, dd], prof)
    r = ratios(projs)
    assert r["distdgl_vs_lsm_epoch"] == pytest.approx(projs["distdgl"].epoch_s / projs["lsm"].epoch_s)
    assert projs["lsm"].epoch_s == pytest.approx(1.0055)
    with pytest.raises(ValueError, match="two records"):
        project_all([lsm, lsm_counts()], prof)


def test_cpu_profile_shares_cores():
    prof = parse_profile(copy.deepcopy(CPU), "test-cpu.yaml")
    pr = project(lsm_counts(), prof)
    # each lane asks for its CPU seconds over the longest lane's (train: the step 0.1 s + DDP's
    # all-reduce over gloo): train 1, fetch (cache 10 ms + exchange 5 ms + reorder 0.5 ms), sample
    # 1 ms, PVP copy 0.01 ms; 2 workers on 2 cores
    ar = gradient_bytes(lsm_counts()) / 1e9
    longest = 0.1 + ar
    k = 2 * (1 + 0.0155 / longest + 0.001 / longest + 1e-5 / longest) / 2
    assert pr.contention == pytest.approx(k)
    assert pr.lanes["train"]["seconds"] == pytest.approx(k * longest)
    # fetch: the CPU parts stretched, the reads not: cache + wait (the 2 workers' reads in step on the
    # shared disk: 2 x 1000 / 1e5 IOPS = 20 ms, - the hit copy, 0.9 ms stretched) + exchange + reorder
    assert pr.lanes["fetch"]["seconds"] == pytest.approx(k * 0.010 + (0.020 - k * 0.0009) + k * 0.005 + k * 0.0005)
    assert pr.stages["storage_wait.storage"]["seconds"] == pytest.approx(0.020)
    # per-device SSDs: each worker has its own, its reads alone: 10 ms
    own = parse_profile({**copy.deepcopy(CPU), "storage": {**CPU["storage"], "shared": False}}, "own.yaml")
    assert project(lsm_counts(), own).stages["storage_wait.storage"]["seconds"] == pytest.approx(0.010)
    assert pr.iteration_s == pytest.approx(k * longest) and pr.bottleneck_stage == "train"
    # every worker's reads go through the one shared disk
    assert pr.floors["ssd"]["seconds"] == pytest.approx(2 * 1000 / 1e5)
    # one worker: less than 2 busy cores on 2 cores, no stretch
    assert project(lsm_counts(workers=1, exchange_bytes=0, peer_rows=0), prof).contention == 1.0
    # a fetch lane as long as the train step: both lanes keep a core busy, 4 lanes on 2 cores
    busy = project(lsm_counts(rows=10000, storage_io_ops=0, storage_rows=0, storage_bytes=0, exchange_bytes=9e7,
                              peer_rows=0, victim_hits=0), prof)
    assert busy.contention == pytest.approx(2 * (1 + 0.1 / longest + 0.001 / longest) / 2)


def test_validate_reports_error_per_system():
    c = lsm_counts()
    c.measured = {"epoch_steady_s": 1.0}
    res = validate([c], gpu(), tolerance=0.2)
    assert res["systems"]["lsm"]["error"] == pytest.approx(0.0055)
    assert res["ok"]
    c.measured = {"epoch_steady_s": 2.0}
    res = validate([c], gpu(), tolerance=0.2)
    assert res["systems"]["lsm"]["error"] == pytest.approx(1.0055 / 2 - 1) and not res["ok"]


# ---- profiles --------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", PACKAGED)
def test_packaged_profiles_load(name):
    p = load_profile(name)
    assert p.name == name
    assert p.cpu_only == (name == "this-machine")


def _write(tmp_path, data, name="prof.yaml"):
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return path


def test_profile_bad_yaml_names_file(tmp_path):
    path = _write(tmp_path, "name: x\ncompute: [unclosed\n", "broken.yaml")
    with pytest.raises(ConfigError) as e:
        load_profile(path)
    assert "broken.yaml" in str(e.value) and "(yaml)" in str(e.value) and "line" in str(e.value)


def test_profile_missing_key_names_file_and_key(tmp_path):
    d = copy.deepcopy(GPU)
    del d["storage"]["ssd_iops"]
    with pytest.raises(ConfigError) as e:
        load_profile(_write(tmp_path, d, "nokey.yaml"))
    assert e.value.key == "storage.ssd_iops" and "nokey.yaml" in e.value.source
    assert "missing" in e.value.problem


def test_profile_negative_bandwidth(tmp_path):
    d = copy.deepcopy(GPU)
    d["links"]["pcie"]["bandwidth"] = -25e9
    with pytest.raises(ConfigError) as e:
        load_profile(_write(tmp_path, d, "neg.yaml"))
    assert str(e.value).startswith(str(tmp_path / "neg.yaml") + ": links.pcie.bandwidth: ")
    assert "greater than 0" in str(e.value)


def test_profile_unknown_key_and_cross_checks(tmp_path):
    d = copy.deepcopy(GPU)
    d["storage"]["ssd_iopz"] = 1
    with pytest.raises(ConfigError, match="storage.ssd_iopz: unknown key"):
        parse_profile(d, "u.yaml")
    d = copy.deepcopy(GPU)
    d["compute"]["memory_bandwidth"] = None
    with pytest.raises(ConfigError, match="u.yaml: compute.memory_bandwidth: required"):
        parse_profile(d, "u.yaml")
    with pytest.raises(ConfigError, match="no such profile"):
        load_profile("no-such-profile")


# ---- records and the CLI --------------------------------------------------------------------------
def hand_record(system="lsm", steady=30.0):
    """A minimal valid run record: 2 devices, 2 epochs of 2 warm-up + 3 timed iterations, 100 per epoch."""
    n = 2 * 2 * 3  # devices x epochs x timed iterations
    rec = {
        "schema_version": 1, "kind": "train", "system": system, "status": "complete",
        "created": "2026-11-30T00:00:00+00:00",
        "config": {"sampler": {"batch_size": 1024, "fanouts": [10, 15], "prefetch_batches": 2},
                   "model": {"name": "sage", "hidden": 256}, "train": {"overlap_fetch": True}},
        "metrics": {
            "rows": {"requests": 10000 * n, "distinct": 10000 * n, "local_hits": 4000 * n, "peer_hits": 4900 * n,
                     "victim_hits": 100 * n, "storage_rows": 1000 * n, "peer_rows": 5000 * 2 * 5, "coalesced": 0},
            "traffic": {"storage_bytes": 1_000_000 * n, "storage_io_ops": 1000 * n, "device_exchange_bytes": 0,
                        "host_to_device_bytes": 0},
            "time": {"per_iteration": {"train": 0.2}, "epoch_steady_s": steady, "epoch_cold_s": steady,
                     "timing_window": {"full_epoch": False, "warmup_iters": 2, "timed_iters": 3,
                                       "iterations_per_epoch": 100}},
            "multidevice": {"devices": 2, "iterations": 5, "exchange_bytes_per_iteration": 1e7},
            "dataset": {"nodes": 100000, "feature_bytes": 100000 * 1000},
        },
        "epochs": [{"epoch": 0, "iterations": 5}, {"epoch": 1, "iterations": 5}],
        "versions": {}, "git_commit": None, "hardware": {}, "failure": None,
    }
    validate_record(rec)
    return rec


def test_counts_normalised_per_worker_and_iteration():
    c = counts_from_record(hand_record(), "r.json")
    assert (c.workers, c.iterations_per_epoch, c.row_bytes) == (2, 100, 1000)
    assert c.rows == 10000 and c.storage_rows == 1000 and c.storage_bytes == 1e6
    assert c.peer_rows == 5000                      # / (2 devices x 5 iterations run)
    assert c.exchange_bytes == 5e6                  # 1e7 per iteration over 2 devices
    bad = hand_record()
    bad["status"] = "failed"
    with pytest.raises(DataError, match="r.json: record status"):
        counts_from_record(bad, "r.json")


def test_counts_are_the_steady_epochs_when_the_record_has_them():
    """The measured time is the steady epoch's: its counts are taken, not the mean over both
    epochs' windows (here the steady epoch reads 1,400 rows per device and iteration, the cold
    window 600)."""
    rec = hand_record()
    per_epoch = 2 * 3  # devices x timed iterations
    cold = {"requests": 10000 * per_epoch, "storage_rows": 600 * per_epoch}
    warm = {"requests": 10000 * per_epoch, "storage_rows": 1400 * per_epoch}
    rec["epochs"][0].update(rows=cold, io={"bytes_read": 600_000 * per_epoch, "io_ops": 600 * per_epoch})
    rec["epochs"][1].update(rows=warm, io={"bytes_read": 1_400_000 * per_epoch, "io_ops": 1400 * per_epoch})
    rec["metrics"]["time"]["timing_window"]["steady_epochs"] = [1]
    c = counts_from_record(rec, "r.json")
    assert c.rows == pytest.approx(10000) and c.storage_rows == pytest.approx(1400)
    assert c.storage_bytes == pytest.approx(1.4e6) and c.storage_io_ops == pytest.approx(1400)
    # rank 0's epochs of an older record: their ratio stands for every device's totals
    for ep in rec["epochs"]:
        ep["rows"] = {k: v // 2 for k, v in ep["rows"].items()}
    assert counts_from_record(rec, "r.json").storage_rows == pytest.approx(1400)


def test_cli_json_on_hand_made_record(tmp_path):
    path = tmp_path / "lsm.json"
    path.write_text(json.dumps(hand_record()))
    res = CliRunner().invoke(cli, ["project", str(path), "--hardware", "paper", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    lsm = out["systems"]["lsm"]
    assert out["profile"] == "paper" and out["counts"]["lsm"]["rows"] == 10000
    assert lsm["epoch_s"] == pytest.approx(lsm["iteration_s"] * 100)
    # paper: 2 SSDs x 0.75 M IOPS per GPU: 1000 reads -> 0.667 ms; train 8 ms fixed + 4 ms x 10000 / 42730 rows
    assert lsm["stages"]["serve.storage"]["seconds"] == pytest.approx(1000 / 1.5e6)
    pcie = load_profile("paper").links.pcie   # no NVLink in the paper's profile: DDP's all-reduce over PCIe
    ar = gradient_bytes(counts_from_record(hand_record())) / pcie.bandwidth + pcie.latency_s
    from lsm_gnn.accelerator import load_accelerator

    step = load_accelerator("a100").step   # the paper profile's accelerator; the record has no edges
    assert lsm["iteration_s"] == pytest.approx(step.fixed_s + step.row_s * 10000 + ar)
    assert lsm["bottleneck"] == "lane:train"
    # --set and --counts reach the model; --scale-nodes scales the iterations only
    res = CliRunner().invoke(cli, ["project", str(path), "--hardware", "paper", "--json",
                                   "--set", "storage.ssds_per_device=1", "--counts", "lsm.storage_rows=40000",
                                   "--scale-nodes", "200000"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    lsm = out["systems"]["lsm"]
    assert lsm["iterations_per_epoch"] == 200
    assert lsm["stages"]["serve.storage"]["seconds"] == pytest.approx(40000 / 7.5e5)  # reads scaled with the rows
    assert lsm["bottleneck_stage"] == "serve: storage"


def test_cli_validate_exit_status(tmp_path):
    path = tmp_path / "lsm.json"
    good = hand_record()
    c = counts_from_record(good)
    good["metrics"]["time"]["epoch_steady_s"] = project(c, load_profile("paper")).epoch_s * 1.1
    path.write_text(json.dumps(good))
    res = CliRunner().invoke(cli, ["project", "--validate", str(path), "--hardware", "paper"])
    assert res.exit_code == 0, res.output
    assert "lsm" in res.output and "within 20%" in res.output
    path.write_text(json.dumps(hand_record(steady=1000.0)))
    res = CliRunner().invoke(cli, ["project", "--validate", str(path), "--hardware", "paper", "--json"])
    assert res.exit_code == 1
    assert json.loads(res.output)["ok"] is False


def test_cli_bad_profile_override(tmp_path):
    path = tmp_path / "lsm.json"
    path.write_text(json.dumps(hand_record()))
    res = CliRunner().invoke(cli, ["project", str(path), "--hardware", "paper", "--set", "links.nic.bandwidth=-1"])
    assert res.exit_code != 0
    assert "links.nic.bandwidth" in str(res.exception) or "links.nic.bandwidth" in res.output


def test_storage_from_a_bench_storage_file(tmp_path):
    from lsm_gnn.project.cli import storage_sets

    bench = {"benchmark": "storage", "fio": {"random": {"available": True, "iops": 80000.0},
                                             "sequential": {"available": False, "reason": "x"}},
             "fault": {"latency_s": 5e-5, "second_process_wait_s": 1.5e-5, "page_cache_s": 5e-6,
                       "capped_mmap_s": 8e-5, "capped_processes": 2}}
    f = tmp_path / "bench.json"
    f.write_text(json.dumps(bench))
    assert storage_sets(f) == ["storage.ssd_iops=80000.0", "storage.latency_s=5e-05", "cpu.fault_cpu_s=5e-06",
                               "storage.fault_s=8e-05", "storage.fault_processes=2"]
    path = tmp_path / "lsm.json"
    path.write_text(json.dumps(hand_record()))
    res = CliRunner().invoke(cli, ["project", "--validate", str(path), "--hardware", "this-machine",
                                   "--storage-from", str(f), "--set", "storage.ssd_iops=1000", "--json"])
    out = json.loads(res.output)
    # the benchmark's values reach the profile; an explicit --set wins over them
    assert out["profile_overrides"][-1] == "storage.ssd_iops=1000" and "storage.latency_s=5e-05" in out["profile_overrides"]
    f.write_text(json.dumps({"benchmark": "train"}))
    res = CliRunner().invoke(cli, ["project", str(path), "--hardware", "this-machine", "--storage-from", str(f)])
    assert res.exit_code != 0 and "not the output of lsm-gnn bench storage or bench compare" in str(res.exception)
    f.write_text("[1, 2]")
    with pytest.raises(DataError, match=r"bench.json: the storage benchmark \(expected a JSON object, found list\)"):
        storage_sets(f)


def test_storage_from_a_bench_compare_file_is_the_disk_as_its_runs_found_it(tmp_path):
    from lsm_gnn.project.cli import storage_sets

    f = tmp_path / "compare.json"
    f.write_text(json.dumps({"benchmark": "compare", "limits": {"fio": {"best_iops": 92000.0}},
                             "disk": {"iops_before_runs": {"median": 79000.0, "min": 68000.0, "max": 92000.0}}}))
    # the median of the rates before the runs, not fio's best moment
    assert storage_sets(f) == ["storage.ssd_iops=79000.0"]
    f.write_text(json.dumps({"benchmark": "compare", "systems": {}}))
    with pytest.raises(DataError, match=r"compare.json: a bench compare output without the disk's rate"):
        storage_sets(f)


def test_repeat_records_are_averaged_and_must_be_the_same_run(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(hand_record(steady=30.0)))
    b.write_text(json.dumps(hand_record(steady=40.0)))
    res = CliRunner().invoke(cli, ["project", "--validate", str(a), str(b), "--hardware", "paper", "--json"])
    lsm = json.loads(res.output)["systems"]["lsm"]
    assert lsm["measured_epoch_s"] == pytest.approx(35.0) and lsm["measured_runs_s"] == [30.0, 40.0]
    assert lsm["error"] == pytest.approx(lsm["projected_epoch_s"] / 35.0 - 1)
    res = CliRunner().invoke(cli, ["project", "--validate", str(a), str(b), "--hardware", "paper"])
    assert "[2 runs: 30.0, 40.0]" in res.output
    other = hand_record()
    other["config"]["sampler"]["batch_size"] = 128
    b.write_text(json.dumps(other))
    res = CliRunner().invoke(cli, ["project", str(a), str(b), "--hardware", "paper"])
    assert res.exit_code != 0 and "not a repeat of" in str(res.exception) and "batch_size" in str(res.exception)


def test_cpu_index_scales_the_cpu_figures_of_a_cpu_profile(tmp_path):
    from lsm_gnn.project.calibrate import cpu_index_seconds, speed_sets
    from lsm_gnn.project.cli import run_projection

    data = copy.deepcopy(CPU)
    data["cpu"]["index_s"] = 0.02
    prof = parse_profile(data, "t.yaml")
    sets, factor = speed_sets(prof, 0.03, skip={"cpu.io_cpu_s"})
    assert factor == pytest.approx(1.5)
    got = dict(item.split("=") for item in sets)
    assert float(got["compute.step.row_s"]) == pytest.approx(1.5e-5)                 # times x 1.5
    assert float(got["links.exchange.bandwidth"]) == pytest.approx(1e9 / 1.5)         # rates / 1.5
    assert float(got["compute.sample_rows_per_s"]) == pytest.approx(1e7 / 1.5)
    assert "cpu.io_cpu_s" not in got and "storage.ssd_iops" not in got               # skipped; devices untouched
    assert speed_sets(gpu(), 0.03) == ([], 1.0)                                       # a GPU profile: no CPU scaling
    # through the projection: the memory ideal's train step grows with the factor
    yml = tmp_path / "cpu.yaml"
    yml.write_text(yaml.safe_dump(data))
    path = tmp_path / "memory.json"
    path.write_text(json.dumps(hand_record(system="memory")))
    base = run_projection([path], str(yml))["systems"]["memory"]["stages"]["train"]["seconds"]
    slow = run_projection([path], str(yml), cpu_index_s=0.04)
    assert slow["systems"]["memory"]["stages"]["train"]["seconds"] == pytest.approx(2 * base)
    assert slow["cpu_index"] == {"profile_s": 0.02, "runs_s": 0.04, "samples": 1, "factor": 2.0, "from": "now"}
    assert cpu_index_seconds(reps=3) > 0


def test_the_profile_is_put_at_the_median_cpu_speed_of_the_runs(tmp_path):
    """Records that carry the index measured around their runs: the median of all their indexes
    (one speed for the whole set); one record without: the index now."""
    from lsm_gnn.project.cli import run_projection

    data = copy.deepcopy(CPU)
    data["cpu"]["index_s"] = 0.02
    yml = tmp_path / "cpu.yaml"
    yml.write_text(yaml.safe_dump(data))
    paths = []
    for system, before, after in [("memory", 0.02, 0.07), ("memory", 0.03, 0.05), ("direct", 0.03, 0.04)]:
        rec = hand_record(system=system)
        rec["metrics"]["cpu_index_s"] = {"before": before, "after": after}
        paths.append(tmp_path / f"{system}-{len(paths)}.json")
        paths[-1].write_text(json.dumps(rec))
    base = run_projection(paths, str(yml))
    out = run_projection(paths, str(yml), calibrate_cpu=True, cpu_index_s=0.01)
    # the six indexes 0.02 0.03 0.03 0.04 0.05 0.07: median 0.035, x 1.75 (the index now is not used)
    assert out["cpu_index"] == {"profile_s": 0.02, "runs_s": pytest.approx(0.035), "samples": 6,
                                "factor": pytest.approx(1.75), "from": "records"}
    for s in ("memory", "direct"):
        assert out["systems"][s]["stages"]["train"]["seconds"] == \
            pytest.approx(1.75 * base["systems"][s]["stages"]["train"]["seconds"])
    val = run_projection(paths, str(yml), calibrate_cpu=True, validate_only=True, profile_figures=True)
    assert val["systems"]["memory"]["projected_epoch_s"] == pytest.approx(out["systems"]["memory"]["epoch_s"])
    bare = tmp_path / "lsm.json"
    bare.write_text(json.dumps(hand_record(system="lsm")))
    now = run_projection([*paths, bare], str(yml), calibrate_cpu=True, cpu_index_s=0.01)["cpu_index"]
    assert (now["from"], now["runs_s"], now["factor"]) == ("now", 0.01, pytest.approx(0.5))


def test_rows_through_shared_memory_cost_a_host_memory_copy_not_the_gloo_link():
    prof = parse_profile(copy.deepcopy(CPU), "test-cpu.yaml")
    gloo = project(lsm_counts(), prof)
    shm = project(lsm_counts(row_transport="shm"), prof)
    bw = CPU["links"]["host_memory"]["bandwidth"]
    assert shm.stages["exchange_rows"]["seconds"] == pytest.approx(5e6 / bw)
    assert gloo.stages["exchange_rows"]["seconds"] == pytest.approx(5e6 / CPU["links"]["exchange"]["bandwidth"])
    # a GPU profile ignores the CPU ranks' transport: the rows cross its link (NVLink here), the part
    # the table names for the exchange in the paper's testbed (no NVLink there: PCIe)
    st = project(lsm_counts(row_transport="shm"), gpu()).stages["exchange_rows"]
    assert (st["link"], st["resource"], st["table_stages"]) == ("nvlink", "pcie", ["exchange_rows"])


def test_with_the_read_ahead_the_reads_are_a_lane_of_their_own_on_the_cpu():
    prof = parse_profile(copy.deepcopy(CPU), "test-cpu.yaml")
    # a fetch lane the reads would dominate: 10,000 reads per worker, 2 workers on the shared disk
    slow_disk = dict(storage_rows=10000, storage_io_ops=10000, storage_bytes=1e7)
    off, on = project(lsm_counts(**slow_disk), prof), project(lsm_counts(readahead=True, **slow_disk), prof)
    assert "reads" not in off.lanes and "storage_wait.storage" in off.stages
    # with it: the fetch lane is the cache, the exchange and the reorder; the reads (2 x 10,000 /
    # 1e5 IOPS = 0.2 s) run beside it and bound the iteration instead of adding to the fetch lane
    assert "storage_wait" not in on.stages and on.lanes["reads"]["seconds"] == pytest.approx(0.2)
    assert on.lanes["fetch"]["seconds"] < off.lanes["fetch"]["seconds"] - 0.15
    assert on.iteration_s == pytest.approx(max(ln["seconds"] for ln in on.lanes.values()))
    assert on.iteration_s < off.iteration_s and on.bottleneck == "lane:reads"


def test_with_the_read_ahead_the_reads_and_their_copy_in_are_a_lane_of_their_own_on_the_gpu_too():
    """The record's data plane read ahead (the CPU engine's read-ahead, which the emulated testbed
    runs): batch t+1's reads run beside the exchange of batch t, not before it."""
    off, on = project(lsm_counts(), gpu()), project(lsm_counts(readahead=True), gpu())
    # 1,000 reads / 1e5 IOPS = 10 ms; the exchange (5 MB over NVLink) 0.05 ms after it without
    assert off.lanes["fetch"]["stages"] == ["exchange_ids", "serve", "exchange_rows", "reorder"]
    assert off.iteration_s == pytest.approx(0.010 + 5e6 / 1e11 + 5000 * 1000 / 1e12)
    assert on.lanes["fetch"]["stages"] == ["exchange_ids", "cache", "exchange_rows", "reorder"]
    assert on.lanes["reads"]["seconds"] == pytest.approx(0.010) and on.stages["reads.pcie_in"]["resource"] == "pcie"
    assert on.iteration_s == pytest.approx(0.010) and on.bottleneck == "lane:reads"


def test_a_record_says_whether_its_reads_ran_ahead():
    rec = hand_record()
    assert counts_from_record(rec, "r.json").readahead is False     # a record from before the read-ahead
    rec["config"]["cache"] = {"readahead": True}
    assert counts_from_record(rec, "r.json").readahead is True
    assert counts_from_record(hand_record("direct") | {"config": rec["config"]}, "r.json").readahead is False


# ---- the testbed's table, the slowest worker, the gate, the machine measured (issue 43) -------------
SYSTEM_COUNTS = {
    "lsm": lambda **kw: lsm_counts(**kw),
    "isolated": lambda **kw: lsm_counts(system="isolated", exchange_bytes=0, peer_rows=0, **kw),
    "direct": lambda **kw: lsm_counts(system="direct", **kw),
    "mmap": lambda **kw: lsm_counts(system="mmap", overlap_fetch=False, **kw),
    "memory": lambda **kw: lsm_counts(system="memory", storage_rows=0, storage_io_ops=0, storage_bytes=0, **kw),
    "distdgl": lambda **kw: Counts(system="distdgl", workers=4, machines=2, iterations_per_epoch=50,
                                   row_bytes=1000, rows=10000, network_bytes_per_machine=2e7, servers=2, **kw),
}


@pytest.mark.parametrize("system", sorted(SYSTEM_COUNTS))
def test_every_projected_stage_names_its_table_stages_and_takes_its_part_from_the_table(system):
    from lsm_gnn.testbed import PARTS, part_of

    cpu = parse_profile(copy.deepcopy(CPU), "test-cpu.yaml")
    for prof, extra in ((gpu(), {}), (gpu(storage__gpu_initiated=False), {}), (cpu, {}), (cpu, {"readahead": True})):
        if system == "distdgl" and extra:
            continue
        pr = project(SYSTEM_COUNTS[system](**extra), prof)
        for name, st in pr.stages.items():
            assert st["table_stages"] and st["resource"] in PARTS, (system, name)
            parts = {part_of(system, t).part for t in st["table_stages"]}
            if prof.cpu_only:    # this machine: only the SSD and an emulated wait are not its CPU
                assert st["resource"] in ("host", "ssd"), (system, name, st)
            else:
                assert st["resource"] in parts, (system, name, st)
    # the table's corrections on the paper's setting: the step is the accelerator's, Dist-DGL's
    # sampling is host work, its all-reduce crosses the NIC, LSM-GNN's exchange crosses PCIe
    paper = load_profile("paper")
    d = project(SYSTEM_COUNTS["distdgl"](), paper).stages
    assert d["train"]["resource"] == "accelerator" and d["rpc_sample"]["resource"] == "host"
    assert d["allreduce"]["resource"] == "nic" and d["h2d"]["table_stages"] == ["copy_to_gpu"]
    assert project(lsm_counts(), paper).stages["exchange_rows"]["resource"] == "pcie"


def test_a_projected_stage_with_no_table_entry_is_an_error_naming_it(monkeypatch):
    import lsm_gnn.project.model as M

    monkeypatch.delitem(M.TABLE_STAGES, "reorder")
    with pytest.raises(ValueError, match="projected stage 'reorder' names no stage of the testbed's table"):
        project(lsm_counts(), gpu())


def distdgl_record(**distdgl):
    """A minimal Dist-DGL record: 2 machines x 2 trainers, 2 epochs of 5 iterations, the step emulated."""
    rec = hand_record(system="distdgl")
    rec["metrics"]["rows"] = {"requests": 10000 * 4 * 2 * 5}
    rec["metrics"]["traffic"] = {"storage_bytes": 0, "storage_io_ops": 0, "device_exchange_bytes": 0,
                                 "host_to_device_bytes": 0, "kvstore_feature_bytes": 10000 * 1000 * 4 * 5}
    rec["metrics"]["time"]["per_iteration"] = {"sample": 0.02, "exchange_rows": 0.04, "train": 0.01,
                                               "sync": 0.03, "other": 0.01}
    rec["metrics"]["accelerator"] = {"mode": "emulated", "profile": "a100",
                                     "step": {"fixed_s": 0.001, "row_s": 1e-7, "edge_s": 0.0}}
    rec["metrics"]["distdgl"] = {"machines": 2, "trainers_per_machine": 2, "servers_per_machine": 1, **distdgl}
    validate_record(rec)
    return rec


def test_the_wait_for_the_slowest_trainer_comes_from_the_records_per_step_times_and_ends_before_the_all_reduce():
    rec = distdgl_record(trainer_work_s={"mean_s": 0.08, "slowest_s": 0.1, "steps": 30, "slowest_over_mean": 1.25})
    c = counts_from_record(rec, "d.json")
    assert c.straggler == 1.25 and "trainer_work_s" in c.straggler_from
    pr = project(c, gpu())
    lane = pr.lanes["trainer"]
    assert lane["stages"][-2:] == ["straggler", "allreduce"]
    st, ar = pr.stages["straggler"], pr.stages["allreduce"]
    before = lane["seconds"] - st["seconds"] - ar["seconds"]
    assert st["seconds"] == pytest.approx(0.25 * before)        # (rho - 1) x the iteration before the all-reduce
    assert "rho 1.25" in st["formula"] and "trainer_work_s" in st["formula"] and st["resource"] == "nic"
    no_wait = copy.deepcopy(c)
    no_wait.straggler = 1.0
    assert pr.iteration_s == pytest.approx(project(no_wait, gpu()).iteration_s + st["seconds"])


def test_without_per_trainer_times_the_wait_is_the_emulated_records_sync_share_and_else_the_stated_default():
    from lsm_gnn.project.counts import STRAGGLER_DEFAULT

    c = counts_from_record(distdgl_record(), "d.json")
    # the emulated step's all-reduce is only a meeting: its 30 ms sync is the wait for the slowest
    assert c.straggler == pytest.approx((0.08 + 0.03) / 0.08) and "sync" in c.straggler_from
    real = distdgl_record()
    real["metrics"]["accelerator"] = {"mode": "real"}
    c = counts_from_record(real, "d.json")
    assert (c.straggler, c.straggler_from.split(" ")[0]) == (STRAGGLER_DEFAULT, "default")
    # lsm-gnn's devices: the ranks' stage means
    lsm = hand_record()
    lsm["metrics"]["ranks"] = {"0": {"time": {"per_iteration": {"train": 0.2, "fetch_cache": 0.1, "sync": 0.5}}},
                               "1": {"time": {"per_iteration": {"train": 0.2, "fetch_cache": 0.2, "sync": 0.0}}}}
    c = counts_from_record(lsm, "l.json")
    assert c.straggler == pytest.approx(0.4 / 0.35) and "ranks" in c.straggler_from
    assert project(lsm_counts(workers=1), gpu()).stages.get("straggler") is None   # one worker waits for no one


def test_the_validation_gate_is_taken_over_the_systems_the_claim_compares_and_reports_the_others():
    good, off = lsm_counts(), lsm_counts(system="memory", storage_rows=0, storage_io_ops=0, storage_bytes=0)
    good.measured = {"epoch_steady_s": project(good, gpu()).epoch_s * 1.05}
    off.measured = {"epoch_steady_s": project(off, gpu()).epoch_s * 3.0}
    res = validate([good, off], gpu(), tolerance=0.2)
    assert res["gated_systems"] == ["lsm"] and res["ok"]
    assert res["max_abs_error"] == pytest.approx(1 - 1 / 1.05)
    assert res["max_abs_error_all"] == pytest.approx(abs(1 / 3 - 1))
    assert res["systems"]["memory"]["gated"] is False and res["systems"]["lsm"]["gated"] is True
    every = validate([good, off], gpu(), tolerance=0.2, systems=None)
    assert not every["ok"] and every["max_abs_error"] == every["max_abs_error_all"]
    # no record of a gated system: no verdict
    assert validate([off], gpu())["ok"] is False and validate([off], gpu())["max_abs_error"] is None


def test_validating_on_a_cpu_profile_measures_the_machine_here_and_records_what_it_replaced(tmp_path, monkeypatch):
    import lsm_gnn.project.calibrate as cal
    from lsm_gnn.project.cli import run_projection

    asked = []

    def gather(seconds=1.0, seed=0, batch_rows=0, row_bytes=0):
        asked.append((batch_rows, row_bytes))
        return {"bandwidth": 5e9, "reps": 7, "seconds_per_batch": 0.0067, "batch_rows": batch_rows,
                "row_bytes": row_bytes, "table_rows": 65536, "seed": seed}

    monkeypatch.setattr(cal, "host_memory_bandwidth", gather)
    monkeypatch.setattr(cal, "cpu_index_seconds", lambda reps=cal.REPS, seed=0: 0.01)
    data = copy.deepcopy(CPU)
    data["cpu"]["index_s"] = 0.02
    yml = tmp_path / "cpu.yaml"
    yml.write_text(yaml.safe_dump(data))
    path = tmp_path / "memory.json"
    path.write_text(json.dumps(hand_record(system="memory")))
    res = run_projection([path], str(yml), validate_only=True, gate=None)
    m = res["machine"]["measured"]
    assert m["links.host_memory.bandwidth"]["value"] == 5e9 and m["links.host_memory.bandwidth"]["replaced"] == 1e10
    assert m["cpu.cache_row_s"]["value"] == pytest.approx(0.5e-6) and m["cpu.cache_row_s"]["replaced"] == 1e-6
    assert res["cpu_index"]["from"] == "now" and res["cpu_index"]["factor"] == pytest.approx(0.5)
    assert asked[0] == (10000, 1000)     # the gather measured at the records' rows per iteration and row size
    assert "links.host_memory.bandwidth=5000000000.0" in res["profile_overrides"]
    # --profile-figures: the profile as it is; an explicit --set wins over the measurement
    assert run_projection([path], str(yml), validate_only=True, profile_figures=True)["machine"]["measured"] == {}
    kept = run_projection([path], str(yml), validate_only=True, sets=["links.host_memory.bandwidth=2e9"])
    assert "links.host_memory.bandwidth" not in kept["machine"]["measured"]
    # a GPU profile's figures are another machine's: nothing measured
    assert run_projection([path], "paper", validate_only=True)["machine"]["measured"] == {}


def test_the_host_memory_gather_is_measured_on_a_seeded_table_in_bytes_per_second():
    from lsm_gnn.project.calibrate import host_memory_bandwidth

    got = host_memory_bandwidth(seconds=0.0, seed=3, batch_rows=512, row_bytes=2048)
    assert got["reps"] >= 3 and got["seed"] == 3 and (got["batch_rows"], got["row_bytes"]) == (512, 2048)
    assert got["table_rows"] * 2048 == 256 << 20    # a table well beyond the caches
    assert got["bandwidth"] == pytest.approx(512 * 2048 / got["seconds_per_batch"])


def test_the_exit_status_of_validate_follows_the_gated_systems_only(tmp_path):
    lsm, mem = tmp_path / "lsm.json", tmp_path / "memory.json"
    good = hand_record()
    good["metrics"]["time"]["epoch_steady_s"] = project(counts_from_record(good), load_profile("paper")).epoch_s
    lsm.write_text(json.dumps(good))
    mem.write_text(json.dumps(hand_record(system="memory", steady=1000.0)))   # far off, but not compared
    res = CliRunner().invoke(cli, ["project", "--validate", str(lsm), str(mem), "--hardware", "paper"])
    assert res.exit_code == 0, res.output
    assert "(reported, not gating)" in res.output and "max |error| over lsm 0.0%: within 20%" in res.output
    res = CliRunner().invoke(cli, ["project", "--validate", str(lsm), str(mem), "--hardware", "paper", "--gate", "all"])
    assert res.exit_code == 1 and "max |error| over lsm, memory" in res.output
    res = CliRunner().invoke(cli, ["project", "--validate", str(lsm), "--hardware", "paper", "--gate", ","])
    assert res.exit_code != 0 and "--gate" in str(res.exception)


def test_a_dist_dgl_pull_waits_for_the_remote_servers_queue_and_the_servers_bound_the_iteration():
    c = SYSTEM_COUNTS["distdgl"]()      # 2 machines x 2 trainers, 1 server each; 2e7 B sent per machine
    base = project(c, gpu())
    pr = project(c, gpu(cpu__kvstore_server_row_s=1e-6))
    # each trainer pulls 1e7 B = 10,000 remote rows; its machine's 2 trainers queue on the one remote
    # server: on average (2 + 1) / 2 requests of 10,000 rows x 1 us
    assert pr.stages["kv_pull"]["seconds"] == pytest.approx(base.stages["kv_pull"]["seconds"] + 1.5 * 0.01)
    assert "the remote server: (2 + 1) / 2 requests x 1e+04 rows x 1e-06 s" in pr.stages["kv_pull"]["formula"]
    assert pr.stages["kv_pull"]["table_stages"] == ["exchange_rows", "pull_rpc", "server_pull"]
    # the floor: a machine's server sends 20,000 rows x 1 us; far below the trainer here
    assert pr.floors["server"]["seconds"] == pytest.approx(0.02) and "server" not in base.floors
    slow = project(c, gpu(cpu__kvstore_server_row_s=1e-4))
    assert slow.bottleneck == "floor:server" and slow.iteration_s == pytest.approx(2.0)
