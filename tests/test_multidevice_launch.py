"""Multi-device runs through the launcher: 2 gloo ranks on 127.0.0.1, replaying one trace.

Shared vs isolated on the same trace, rows checked against the file, determinism, and the
failure path (a killed rank, a hung rank) with the record naming the failed rank.
"""

import json
import time

import numpy as np
import pytest

from lsm_gnn.cache.replay import replay
from lsm_gnn.config import parse_config
from lsm_gnn.cache.budget import memory_budget
from lsm_gnn.cache.geometry import local_rows
from lsm_gnn.ranks.launch import run_multi_device
from lsm_gnn.records import read_record
from lsm_gnn.sim.trace import Trace
from lsm_gnn.utils.errors import DistributedError

G = 2


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """A small dataset and a 2-device trace with heavy-tailed (shared) requests."""
    import conftest

    root = tmp_path_factory.mktemp("dist")
    ds = conftest._build_random_dataset(root / "ds", num_nodes=3000, dim=16, seed=3)
    rng = np.random.default_rng(0)
    pop = 1.0 / np.arange(1, 3001) ** 0.9
    pop /= pop.sum()
    batches = [[rng.choice(3000, size=300, replace=False, p=pop) for _ in range(G)] for _ in range(12)]
    trace = Trace(G, 3000, batches, {"batches_per_epoch": [12]})
    trace.save(root / "trace.npz")
    return ds, root / "trace.npz", root


def cfg_for(ds, mode, **dist):
    return parse_config({"dataset": {"path": str(ds.root)}, "storage": {"reader": "buffered"},
                         "cache": {"capacity_fraction": 0.05, "policy": "hybrid", "window": 3},
                         "train": {"threads": 1},
                         "distributed": {"devices": G, "mode": mode, **dist}})


def run(ds, trace, mode, record=None, **dist):
    return run_multi_device(cfg_for(ds, mode, **dist), worker="trace", record_path=record, progress=False,
                            worker_args={"trace": str(trace), "verify": True})


def strip_times(x):
    if isinstance(x, dict):
        return {k: strip_times(v) for k, v in x.items()
                if not (k.endswith("_s") or "seconds" in k or k in ("created", "cpu_share"))}
    if isinstance(x, list):
        return [strip_times(v) for v in x]
    return x


def test_shared_reads_at_most_isolated_and_runs_are_deterministic(setup):
    ds, trace, root = setup
    shared = run(ds, trace, "shared", record=root / "shared.json")
    again = run(ds, trace, "shared")
    iso = run(ds, trace, "isolated")
    assert read_record(root / "shared.json")["status"] == "complete"
    rows_s, rows_i = shared["metrics"]["rows"], iso["metrics"]["rows"]
    # every fetch was verified against features.bin inside the ranks; all requests were served
    requests = sum(len(x) for b in Trace.load(trace).batches for x in b)
    assert rows_s["requests"] == rows_i["requests"] == requests
    assert 0 < rows_s["storage_rows"] <= rows_i["storage_rows"]
    md = shared["metrics"]["multidevice"]
    assert md["storage_rows_per_epoch"] == [rows_s["storage_rows"]] == [sum(md["storage_rows_per_iteration"])]
    # the ranks make exactly the cache engine's decisions: shared = every owner replaying what all
    # devices ask it, isolated = every device replaying its own requests
    cfg = cfg_for(ds, "shared")
    t, static = Trace.load(trace), ds.static_scores()
    owner_budget = memory_budget(cfg.cache, 3000, 16 * 4, owned_rows=local_rows(3000, G))
    device_budget = memory_budget(cfg.cache, 3000, 16 * 4)
    assert owner_budget == device_budget  # the same memory per device in both modes
    owner_replays = [replay([np.concatenate([x[x % G == o] for x in b]) for b in t.batches], cfg.cache, 3000,
                            static, budget=owner_budget, num_owners=G, owner=o) for o in range(G)]
    device_replays = [replay(t.device(d), cfg.cache, 3000, static, budget=device_budget) for d in range(G)]
    mem = shared["metrics"]["memory"]
    assert mem["total_bytes"] == owner_budget.total_rows * 16 * 4 == iso["metrics"]["memory"]["total_bytes"]
    assert mem["cache_bytes"] + mem["victim_bytes"] == mem["total_bytes"] and mem["devices"] == G
    assert rows_s["storage_rows"] == sum(r.totals["storage_rows"] for r in owner_replays)
    assert rows_i["storage_rows"] == sum(r.totals["storage_rows"] for r in device_replays)
    assert md["exchange_bytes_per_iteration"] > 0 and shared["metrics"]["traffic"]["device_exchange_bytes"] > 0
    assert iso["metrics"]["traffic"]["device_exchange_bytes"] == 0
    # ranks on one host: the rows went through the owners' shared-memory outboxes, and the record says so
    assert md["row_transport"] == "shm" and iso["metrics"]["multidevice"]["row_transport"] is None
    # every owner read each batch's misses one batch ahead, exactly: in the shared cache the owner's
    # window is what all ranks announced, and that is what they asked for next
    for rec in (shared, iso):
        for r in rec["metrics"]["multidevice"]["per_rank"]:
            st = r["stats"]
            assert st["readahead_rows"] > 0   # (the record keeps numeric stats only)
            assert st["readahead_missed_rows"] == st["readahead_unused_rows"] == 0
    # same seed, same trace: identical records apart from times and provenance stamps
    assert strip_times(shared["metrics"]) == strip_times(again["metrics"])


def test_each_rank_reads_its_own_storage_folder_and_decides_as_with_one_folder(setup, tmp_path):
    ds, trace, _ = setup
    dirs = [str(tmp_path / "nvme0"), str(tmp_path / "nvme1")]
    t, static = Trace.load(trace), ds.static_scores()
    for mode, made in (("shared", "owners-2/owner-{r}.bin"), ("isolated", "owners-1/owner-0.bin")):
        cfg = cfg_for(ds, mode)
        cfg = cfg.model_copy(update={"storage": cfg.storage.model_copy(update={"rank_dirs": dirs})})
        # the ranks verify every row they fetch against features.bin (worker_args verify)
        rec = run_multi_device(cfg, worker="trace", progress=False, worker_args={"trace": str(trace), "verify": True})
        for r in range(G):
            assert (tmp_path / f"nvme{r}" / made.format(r=r)).is_file(), (mode, r)
        # the cache engine's decisions, as with every rank reading the one folder
        if mode == "shared":
            budget = memory_budget(cfg.cache, 3000, 16 * 4, owned_rows=local_rows(3000, G))
            want = [replay([np.concatenate([x[x % G == o] for x in b]) for b in t.batches], cfg.cache, 3000,
                           static, budget=budget, num_owners=G, owner=o) for o in range(G)]
        else:
            budget = memory_budget(cfg.cache, 3000, 16 * 4)
            want = [replay(t.device(d), cfg.cache, 3000, static, budget=budget) for d in range(G)]
        assert rec["metrics"]["rows"]["storage_rows"] == sum(w.totals["storage_rows"] for w in want), mode


@pytest.mark.parametrize("kind", ["kill", "hang"])
def test_failed_rank_stops_the_others_and_is_named(setup, monkeypatch, kind):
    ds, trace, root = setup
    monkeypatch.setenv("LSM_GNN_FAULT", f"rank=1,iter=3,kind={kind}")
    record = root / f"failed-{kind}.json"
    t0 = time.monotonic()
    with pytest.raises(DistributedError, match="rank 1") as err:
        # a hang is detected after timeout_s; a kill at once (whatever the timeout)
        run(ds, trace, "shared", record=record, timeout_s=12.0 if kind == "hang" else 60.0)
    assert time.monotonic() - t0 < 60  # documented bound: within distributed.timeout_s (+ start-up)
    rec = json.loads(record.read_text())
    assert rec["status"] == "failed" and rec["failure"]["rank"] == 1
    assert err.value.rank == 1
    if kind == "kill":
        assert "signal 9" in rec["failure"]["message"]
    else:
        assert "no progress" in rec["failure"]["message"]


@pytest.mark.gpu(devices=2)  # NCCL refuses two ranks on one GPU
def test_shared_cache_on_gpus_makes_the_cpu_runs_decisions(setup):
    """train.device=cuda: NCCL, DeviceCachedFeatureSource and the device data plane in every rank;
    every row verified, and the same storage rows and exchange bytes as the run on the CPU."""
    ds, trace, root = setup
    cpu = run(ds, trace, "shared")
    cfg = parse_config({"dataset": {"path": str(ds.root)}, "storage": {"reader": "buffered"},
                        "cache": {"capacity_fraction": 0.05, "policy": "hybrid", "window": 3},
                        "train": {"threads": 1, "device": "cuda"}, "distributed": {"devices": G, "mode": "shared"}})
    gpu = run_multi_device(cfg, worker="trace", progress=False, worker_args={"trace": str(trace), "verify": True})
    assert gpu["metrics"]["multidevice"]["backend"] == "nccl"
    assert gpu["metrics"]["rows"] == cpu["metrics"]["rows"]
    assert gpu["metrics"]["traffic"]["device_exchange_bytes"] == cpu["metrics"]["traffic"]["device_exchange_bytes"]


def test_ranks_get_the_thread_counts_of_the_config_not_the_callers(setup, monkeypatch):
    """Snakemake exports MKL_NUM_THREADS & co. at a job's thread count; the ranks must not inherit
    them (on the VM, MKL_NUM_THREADS=2 made the same Dist-DGL run 40 % slower). The caller's values
    come back after the start."""
    from lsm_gnn.ranks.spawn import run_ranks
    from lsm_gnn.utils.threads import THREAD_VARS

    ds, _, _ = setup
    for k in THREAD_VARS:
        monkeypatch.setenv(k, "7")
    results, failure, _ = run_ranks(cfg_for(ds, "shared"), "threads_probe:report", {})
    assert failure is None
    for res in results:
        assert res["env"] == {k: "1" for k in THREAD_VARS} and res["torch"] == 1
    import os

    assert all(os.environ[k] == "7" for k in THREAD_VARS)
