"""Dist-DGL on emulated machines: runs with 1 machine (emulated accelerator) and 2 machines (real
training, through the harness), cleanup also after a killed trainer.

Each cluster run costs some 20 s (every process imports DGL; DGL's own connection sleeps): the two
2-machine runs share one dataset and its metis partitioning, built once for the module."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from baselines.distdgl.launch import ClusterSpec, EmulatedCluster
from baselines.distdgl.partition import partition_dataset
from lsm_gnn.config import load_config
from lsm_gnn.project.profiles import load_profile
from lsm_gnn.records import validate_record
from lsm_gnn.utils.errors import DistributedError

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("nsenter"),
                                reason="the Dist-DGL emulation needs root and util-linux unshare/nsenter")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is gone for our purposes only once reaped; EmulatedCluster reaps all it starts
    return True


@pytest.fixture(scope="module")
def two_machines(tmp_path_factory):
    """A dataset, the partition_dir holding its 2-part metis partitioning (where the harness finds
    it under `baseline.partition_dir`) and that partitioning."""
    import conftest

    root = tmp_path_factory.mktemp("distdgl")
    ds = conftest._build_random_dataset(root / "ds", num_nodes=2000, dim=32)
    return ds, root / "parts", partition_dataset(ds, root / "parts" / f"{ds.name}-2-metis", 2, "metis")


def _args(ds, **kw):
    return {"dataset": str(ds.root), "fanouts": [5, 5], "batch_size": 128, "model": {"name": "sage", "hidden": 16},
            "lr": 0.01, "epochs": 2, "eval": True, "eval_nodes": 200, "seed": 0, **kw}


def _shm():
    # Python's own shared-memory blocks and semaphores (psm_*, sem.mp-*: other processes on the
    # machine create and free them at any time) are not DGL's; anything else appearing in
    # /dev/shm during a run and left after it is a leak of the run; nor are the shared cache's
    # outboxes (lsm-gnn-xch-*: a test running beside this one in another pytest worker makes them,
    # and tests/test_multidevice_exchange.py checks that they go), nor an emulated device's clock
    # folders (lsm-gnn-clock-*: the same, tests/test_storage_emulated.py checks that they go)
    return {n for n in os.listdir("/dev/shm")
            if not n.startswith(("psm_", "sem.mp-", "lsm-gnn-xch-", "lsm-gnn-clock-"))}


def test_dist_dgl_with_an_emulated_accelerator_pulls_the_same_rows_and_reports_au(random_dataset, tmp_path):
    from baselines.harness import run_system
    from lsm_gnn.accelerator import load_accelerator

    ds = random_dataset(num_nodes=1500, dim=32)
    before = _shm()
    cfg = load_config(None, [f"dataset.path={ds.root}", "sampler.batch_size=128", "sampler.fanouts=[5,5]",
                             "model.hidden=16", "train.epochs=2", "train.eval_nodes=200",
                             "train.accelerator=emulated", "train.accelerator_profile=a100",
                             "train.accelerator_scale=2"])
    rec = run_system("distdgl", cfg, machines=1, trainers=1, record_path=tmp_path / "r.json")
    validate_record(rec)
    m = rec["metrics"]
    # one machine, partitioned by the run itself
    assert rec["system"] == "distdgl" and rec["status"] == "complete"
    assert m["time"]["epoch_cold_s"] > 0 and m["time"]["epoch_steady_s"] > 0
    assert m["time"]["partition_s"] > 0 and m["time"]["preprocessing_s"] >= m["time"]["partition_s"]
    assert not m["distdgl"]["partition"]["reused"] and m["distdgl"]["part_ids"] == [0]
    assert m["traffic"]["network_bytes"] >= 0  # one machine: nothing needs to cross the network
    assert _shm() - before == set()  # nothing the run created is left
    # the network as the kernel runs it (the default: real), and what the kernel could emulate, said in the record
    ne = m["distdgl"]["network_emulation"]
    assert ne["mode"] == "real" and ne["shape"] is None and ne["qdiscs"] == [] and ne["requested"] == "real"
    assert set(ne["available"]) == {"available", "netem", "tbf", "reason"}
    acc = m["accelerator"]
    step = load_accelerator("a100").step.scaled(2)
    assert acc["mode"] == "emulated" and acc["profile"] == "a100" and acc["scale"] == 2
    n = acc["iterations"]
    assert n > 0 and acc["busy_s"] == pytest.approx(step.fixed_s * n + step.row_s * acc["input_rows_per_iteration"] * n
                                                    + step.edge_s * acc["edges_per_iteration"] * n)
    assert 0 < acc["au"] <= 1 and acc["au_per_worker"] == [acc["au"]]
    assert acc["input_rows_per_iteration"] > acc["seeds_per_iteration"] > 0
    assert m["accuracy"]["trained"] is False and m["accuracy"]["val"] is None
    assert m["throughput"]["samples_per_s"] > 0 and m["traffic"]["kvstore_feature_bytes"] > 0


def test_two_machines_through_the_harness_train_on_their_own_partitions_validate_and_clean_up(
        two_machines, tmp_path, monkeypatch):
    """The end-to-end run: `run_system` on 2 emulated machines with real training (the record, the
    trainers' own metrics, the processes and /dev/shm after it)."""
    from baselines.distdgl import launch
    from baselines.harness import run_system
    from lsm_gnn.utils.threads import THREAD_VARS

    for k in THREAD_VARS:  # as Snakemake exports them for a 2-thread job: the cluster must not inherit them
        monkeypatch.setenv(k, "2")
    clusters = []

    class Watched(launch.EmulatedCluster):  # the harness's cluster, kept for its processes and results
        def run(self, *args, **kw):
            clusters.append(self)
            self.result = super().run(*args, **kw)
            return self.result

    monkeypatch.setattr(launch, "EmulatedCluster", Watched)
    ds, parts, info = two_machines
    before = _shm()
    cfg = load_config(None, [f"dataset.path={ds.root}", f"baseline.partition_dir={parts}", "sampler.batch_size=128",
                             "sampler.fanouts=[5,5]", "model.hidden=16", "train.epochs=2", "train.eval_nodes=200",
                             # the paper profile's NIC (12.5 GB/s at S = 1: above these veths' own speed)
                             "baseline.network_emulation=auto"])
    rec = run_system("distdgl", cfg, machines=2, trainers=1, record_path=tmp_path / "r.json")
    validate_record(rec)
    m = rec["metrics"]
    assert rec["system"] == "distdgl" and rec["status"] == "complete"
    assert m["time"]["epoch_cold_s"] > 0 and m["time"]["epoch_steady_s"] > 0
    assert m["time"]["partition_s"] > 0 and m["time"]["preprocessing_s"] >= m["time"]["partition_s"]
    assert m["distdgl"]["partition"]["reused"] and Path(m["distdgl"]["partition"]["part_config"]) == \
        Path(info.part_config)  # the module's partitioning, found under partition_dir
    assert m["distdgl"]["part_ids"] == [0, 1]
    assert m["traffic"]["network_bytes"] > 0  # two machines: pulls, remote sampling, all-reduce
    assert 0.0 <= m["accuracy"]["val"] <= 1.0
    assert m["distdgl"]["trainer_threads"] == {"torch": 1, "env": {k: "1" for k in THREAD_VARS}}
    speed = m["cpu_index_s"]  # the CPU speed index around the cluster's run, for the projection
    assert speed["before"] > 0 and speed["after"] > 0
    assert m["accelerator"]["mode"] == "real" and m["accuracy"]["trained"] is True
    # the gradient all-reduce between the trainers (over the machines' network) is its own stage
    st = m["time"]["per_iteration"]
    assert st["sync"] > 0 and st["train"] > 0 and "sync" in m["distdgl"]["stage_map"]
    # auto: the delay too where the kernel has sch_netem, else the rate alone and the delay left out
    # counted per epoch (round trips per iteration x the profile's round trip x iterations)
    ne = m["distdgl"]["network_emulation"]
    nic = load_profile("paper").links.nic
    assert ne["requested"] == "auto" and len(ne["qdiscs"]) == 2 and all("tbf" in q for q in ne["qdiscs"])
    assert ne["round_trips_per_iteration"] == 2 * 2 + 1 + 2  # 2 layers sampled, a pull, an all-reduce
    P = m["time"]["timed_window"]["iterations_per_epoch"]
    if ne["available"]["netem"]:
        assert ne["mode"] == "emulated" and ne["missing_delay_epoch_s"] == 0.0
    else:
        assert ne["mode"] == "rate" and not any("netem" in q for q in ne["qdiscs"])
        assert ne["shape"]["delay_s"] == 0.0 and ne["shape"]["missing_round_trip_s"] == pytest.approx(nic.latency_s)
        assert ne["missing_delay_epoch_s"] == pytest.approx(7 * nic.latency_s * P)
    # the trainers' own metrics
    (cluster,) = clusters
    res = cluster.result
    assert sorted(t["part_id"] for t in res.trainer_metrics) == [0, 1]   # each machine its own partition
    assert [t["machine"] for t in res.trainer_metrics] == [0, 1]
    for t in res.trainer_metrics:
        assert len(t["iterations"]) == 2 * t["iters_per_epoch"]
        assert t["net_end"]["tx_bytes"] > t["net_start"]["tx_bytes"]     # remote sampling/pulls/all-reduce
    # both trainers evaluated the same all-reduced accuracy
    assert res.trainer_metrics[0]["accuracy"] == res.trainer_metrics[1]["accuracy"]
    pids = [p.pid for _, p in cluster.procs] + [h.pid for h in cluster.holders] + [cluster.switch.pid]
    assert not any(_alive(p) for p in pids)
    assert _shm() - before == set()  # nothing the run created is left


def test_killed_trainer_fails_the_run_and_leaves_nothing_behind(two_machines, tmp_path):
    ds, _, info = two_machines
    before = _shm()
    cluster = EmulatedCluster(ClusterSpec(machines=2, trainers=1, timeout_s=120), tmp_path / "work")
    with pytest.raises(DistributedError) as err:
        with cluster:
            cluster.run(info.part_config, info.graph_name, _args(ds, die_at={"1": 2}))
    assert err.value.rank == 1 and "signal 9" in str(err.value)
    pids = [p.pid for _, p in cluster.procs] + [h.pid for h in cluster.holders] + [cluster.switch.pid]
    assert len(pids) == 7   # 2 servers, 2 trainers, 2 machine namespace holders, the switch
    assert not any(_alive(p) for p in pids)
    assert _shm() - before == set()  # nothing the run created is left


def test_partitions_kept_under_a_relative_directory_are_found_from_anywhere(random_dataset, tmp_path, monkeypatch):
    """A reused partitioning made under a relative `baseline.partition_dir` names its config by an
    absolute path: the emulated machines run in their own working directories."""
    ds = random_dataset(num_nodes=600, dim=8)
    monkeypatch.chdir(tmp_path)
    first = partition_dataset(ds, "parts/g", 1, "random")
    again = partition_dataset(ds, "parts/g", 1, "random", reuse=True)
    assert again.reused and os.path.isabs(first.part_config) and os.path.isabs(again.part_config)
    monkeypatch.chdir("/")
    assert os.path.isfile(again.part_config)


def test_dist_dgl_in_the_emulated_testbed_charges_every_stage_at_its_part(two_machines, tmp_path):
    """storage.device: emulated puts Dist-DGL in the testbed: the servers' pull and sampling handlers
    and the trainers' own work charged as host work, the round trips and remote bytes on the NIC, the
    copy to the GPU on PCIe; the record names each stage's part and lateness."""
    from baselines.harness import run_system

    ds, part_dir, _ = two_machines
    cfg = load_config(None, [f"dataset.path={ds.root}", "sampler.batch_size=128", "sampler.fanouts=[5,5]",
                             "model.hidden=16", "train.epochs=2", "train.eval=false", "train.warmup_iters=1",
                             "train.timed_iters=3", "train.accelerator=emulated", "train.accelerator_profile=a100",
                             "storage.device=emulated", "storage.device_profile=paper", "emulation.time_scale=8",
                             "emulation.host_speed=1.5", f"baseline.partition_dir={part_dir}"])
    rec = run_system("distdgl", cfg, machines=2, trainers=1, record_path=tmp_path / "r.json")
    validate_record(rec)
    tb = rec["metrics"]["testbed"]
    assert tb["host_speed"] == 1.5 and tb["time_scale"] == 8 and tb["servers_charged"] == 2
    st = tb["stages"]
    for name, part in (("sample", "host"), ("exchange_rows", "host"), ("server_pull", "host"),
                       ("server_sample", "host"), ("sample_rpc", "nic"), ("pull_rpc", "nic"), ("copy_to_gpu", "pcie")):
        assert st[name]["component"] == part and st[name]["count"] > 0, name
    # two machines: some rows come from the other one, each batch's copy carries its feature bytes
    assert tb["counted"]["remote_rows"] > 0 and tb["counted"]["sample_round_trips"] > 0
    assert st["copy_to_gpu"]["charged_s"] > 0 and st["server_pull"]["cpu_s"] > 0
    assert set(tb["parts"]) == {"host", "nic", "pcie"}
    # each charged host stage's resource use, per process (the two trainers, the two servers)
    us = tb["usage"]
    assert set(us) == {"sample", "exchange_rows", "server_pull", "server_sample"}
    assert len(us["exchange_rows"]["cpu_s_by_process"]) == 2 and len(us["server_pull"]["cpu_s_by_process"]) == 2
    assert sum(u["user_s"] + u["sys_s"] for u in us.values()) > 0
    assert all(u[k] >= 0 for u in us.values() for k in ("minflt", "majflt", "nvcsw", "nivcsw"))
    # METIS balanced the training nodes across the machines, as DGL's guide advises
    assert rec["metrics"]["distdgl"]["partition"]["balanced_on"] == "train_mask"
    # a network shaped by tc would be charged twice
    with pytest.raises(Exception, match="shape it twice"):
        run_system("distdgl", load_config(None, [f"dataset.path={ds.root}", "storage.device=emulated",
                                                 "baseline.network_emulation=rate"]), machines=2, trainers=1)


def test_a_stages_resource_use_tells_work_from_a_blocking_wait_and_sums_per_stage_over_processes():
    """thread_usage beside the charge: CPU work shows as user time, a blocking wait as voluntary
    context switches with next to no CPU; usage_block sums a stage over processes and keeps each
    process's CPU seconds."""
    import time

    from baselines.distdgl.testbed import add_usage, thread_usage
    from baselines.harness import usage_block

    usage: dict = {}
    u0 = thread_usage()
    c0 = time.thread_time()
    while time.thread_time() - c0 < 0.05:
        pass
    add_usage(usage, "work", u0)
    u0 = thread_usage()
    for _ in range(5):
        time.sleep(0.01)
    add_usage(usage, "wait", u0)
    work, wait = usage["work"], usage["wait"]
    assert work["user_s"] + work["sys_s"] >= 0.045
    assert wait["nvcsw"] >= 5 and wait["user_s"] + wait["sys_s"] < 0.02
    other = {"work": {"user_s": 1.0, "sys_s": 0.5, "minflt": 3, "majflt": 0, "nvcsw": 2, "nivcsw": 1}}
    block = usage_block([usage, other])
    assert block["work"]["cpu_s_by_process"] == [pytest.approx(work["user_s"] + work["sys_s"]), 1.5]
    assert block["work"]["minflt"] == work["minflt"] + 3 and block["wait"]["cpu_s_by_process"] == [
        pytest.approx(wait["user_s"] + wait["sys_s"])]
