"""The ranks' gradient synchronisation is its own stage (`sync`), not the accelerator's (`train`):
the all-reduce that replaces DDP's gives DDP's gradients, and a rank that waits for a slower peer
records the wait as sync, its train stage staying the step's own time."""

from __future__ import annotations

import os

import pytest
import torch

from lsm_gnn.config import parse_config
from lsm_gnn.ranks.launch import run_multi_device
from lsm_gnn.metrics import bound_stage, exposed_times


def _grads_worker(rank, world, init, out):
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from lsm_gnn.train.sync import allreduce_gradients

    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.ReLU(), torch.nn.Linear(5, 3))
    x = torch.randn(8, 6, generator=torch.Generator().manual_seed(rank + 1))
    ddp = DDP(model)
    ddp(x).square().sum().backward()  # DDP's own all-reduce inside the backward
    want = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    with ddp.no_sync():
        ddp(x).square().sum().backward()
    local = [p.grad.clone() for p in model.parameters()]
    nbytes = allreduce_gradients(model.parameters(), world)
    got = [p.grad.clone() for p in model.parameters()]
    torch.save({"want": want, "got": got, "local": local, "bytes": nbytes}, os.path.join(out, f"{rank}.pt"))
    dist.destroy_process_group()


def test_the_explicit_all_reduce_gives_ddps_averaged_gradients(tmp_path):
    import torch.multiprocessing as mp

    from lsm_gnn.multidevice.group import pick_free_port

    init = f"tcp://127.0.0.1:{pick_free_port('127.0.0.1')}"
    mp.spawn(_grads_worker, args=(2, init, str(tmp_path)), nprocs=2, join=True)
    r0, r1 = (torch.load(tmp_path / f"{r}.pt") for r in (0, 1))
    for a, b, w, l0 in zip(r0["got"], r1["got"], r0["want"], r0["local"]):
        assert torch.allclose(a, w, atol=1e-6) and torch.allclose(a, b, atol=1e-6)
    assert not all(torch.allclose(l0, w) for l0, w in zip(r0["local"], r0["want"]))  # no_sync kept them local
    assert r0["bytes"] == sum(p.numel() for p in r0["want"]) * 4


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    import conftest

    return conftest._build_random_dataset(tmp_path_factory.mktemp("sync") / "ds", num_nodes=1500, dim=16, seed=2)


def _cfg(ds, accelerator):
    return parse_config({"dataset": {"path": str(ds.root)}, "storage": {"reader": "buffered",
                                                                     "drop_page_cache": False},
                         "cache": {"enabled": False}, "sampler": {"batch_size": 64, "fanouts": [3, 3]},
                         "train": {"threads": 1, "epochs": 1, "warmup_iters": 2, "timed_iters": 8, "eval": False,
                                   "accelerator": accelerator, "accelerator_profile": "a100"},
                         "distributed": {"devices": 2, "mode": "isolated"}})


@pytest.mark.parametrize("accelerator", ["emulated", "real"])
def test_a_rank_waiting_for_a_slower_peer_records_the_wait_as_sync_not_train(dataset, accelerator):
    extra = 0.06
    rec = run_multi_device(_cfg(dataset, accelerator), worker="sync_probe:slow_peer", progress=False,
                           worker_args={"slow_rank": 1, "extra_s": extra})
    fast, slow = (rec["metrics"]["ranks"][str(r)]["time"]["per_iteration"] for r in (0, 1))
    # rank 0 waits for rank 1's extra 60 ms per batch at the all-reduce, and only there
    assert fast["sync"] > 0.6 * extra and slow["sync"] < fast["sync"] / 3
    assert fast["train"] < fast["sync"]
    if accelerator == "emulated":  # the accelerator's time is the step's wait, whatever the peer does
        acc = rec["metrics"]["ranks"]["0"]["accelerator"]
        assert fast["train"] == pytest.approx(acc["busy_s"] / acc["iterations"], rel=0.5, abs=0.002)
    # the waiting rank's bound is the sync, never its accelerator
    mean = {**fast, "wall": sum(fast.values()), "wait": 0.0}
    exposed = exposed_times(mean)
    assert max(exposed, key=exposed.get) == "sync"
    assert bound_stage({"metrics": {"time": {"per_iteration": fast}}}) == "sync"
