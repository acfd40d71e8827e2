"""The DGL loader over lsm-gnn feature sources: a stock dgl.nn GraphSAGE trains through the cache,
the rows are the file's, the losses are those of the in-memory run, the ranks of a shared cache
get their shards and the file's rows, and the run record is `lsm-gnn train`'s."""

from __future__ import annotations

import os

os.environ.setdefault("DGLBACKEND", "pytorch")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

dgl = pytest.importorskip("dgl")  # optional (the GPU machine has none): the module skips without it
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from lsm_gnn.config import load_config  # noqa: E402
from lsm_gnn.datasets.synthetic import generate  # noqa: E402
from lsm_gnn.sources.factory import make_feature_source  # noqa: E402
from lsm_gnn.integrations.dgl import DGLDataLoader, graph_from_dataset  # noqa: E402
from lsm_gnn.records import read_record  # noqa: E402
from lsm_gnn.sampling import NeighborSampler, deal_seeds  # noqa: E402
from lsm_gnn.utils.errors import InputError  # noqa: E402

ITERS = 20
FANOUTS = [4, 4]


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    return generate(tmp_path_factory.mktemp("dgl") / "ds", 3000, feature_dim=16, num_classes=5, progress=False)


def cfg_for(ds, cached: bool, **over):
    base = {"dataset.path": str(ds.root), "sampler.batch_size": 64, "sampler.fanouts": FANOUTS, "train.threads": 1,
            "train.seed": 3}
    base.update({"storage.reader": "buffered", "cache.capacity_fraction": 0.1, "cache.window": 3} if cached
                else {"storage.reader": "memory", "cache.enabled": False})
    base.update(over)
    return load_config(None, base)


def _example(name):
    """A module of examples/ (the scripts the README runs), imported from its file."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"lsm_gnn_example_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


SAGE = _example("dgl_sage").SAGE   # the stock DGL GraphSAGE of DGL's examples (dgl.nn.SAGEConv)


def train(loader, truth, seed=0):
    """The user's loop (GIDS-style); returns the losses and whether every row was the file's."""
    torch.manual_seed(seed)
    model = SAGE(16, 16, 5)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    losses, exact = [], True
    for input_nodes, seeds, blocks, x in loader:
        exact &= np.array_equal(x.numpy(), truth[input_nodes.numpy()])
        loss = F.cross_entropy(model(blocks, x), blocks[-1].dstdata["label"])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        loader.log_loss(losses[-1])
    return losses, exact


def test_a_stock_dgl_sage_trains_through_the_cache_with_the_in_memory_runs_losses(ds):
    truth = ds.feature_array()
    runs = {}
    for cached in (True, False):
        cfg = cfg_for(ds, cached)
        with make_feature_source(cfg, ds) as src:
            loader = DGLDataLoader(ds, None, NeighborSampler(ds, FANOUTS, 64), src, cfg=cfg, max_iters=ITERS)
            runs[cached] = train(loader, truth) + (loader.stats(),)
    (cache_losses, cache_exact, cache_stats), (mem_losses, mem_exact, _) = runs[True], runs[False]
    assert cache_exact and mem_exact and len(cache_losses) == ITERS
    assert cache_losses == mem_losses
    rows = cache_stats["rows"]
    assert rows["requests"] > rows["storage_rows"] > 0 and rows["local_hits"] > 0
    assert cache_stats["source"]["window"] == 3 and cache_stats["source"]["kind"] == "CachedFeatureSource"


def test_dgls_own_neighbor_sampler_trains_through_the_cache_on_the_files_rows(ds):
    cfg = cfg_for(ds, True)
    g = graph_from_dataset(ds)
    with make_feature_source(cfg, ds) as src:
        loader = DGLDataLoader(g, ds.split("train"), dgl.dataloading.NeighborSampler(FANOUTS), src, cfg=cfg,
                               max_iters=ITERS)
        losses, exact = train(loader, ds.feature_array())
        batch = next(iter(loader))
    assert exact and len(losses) == ITERS and all(np.isfinite(losses))
    input_nodes, seeds, blocks, _ = batch
    assert torch.equal(blocks[0].srcdata[dgl.NID], input_nodes) and torch.equal(blocks[-1].dstdata[dgl.NID], seeds)
    # epoch 1 (the second iter): the seeds lsm-gnn's own sampler deals for it
    expect = deal_seeds(np.asarray(ds.split("train")), 1, seed=3, shuffle=True, rank=0, world_size=1)[:64]
    assert np.array_equal(seeds.numpy(), expect)


def test_a_rank_gets_its_shard_of_the_seeds(ds):
    cfg = cfg_for(ds, False)
    train_ids = np.asarray(ds.split("train"))
    got = []
    for rank in range(2):
        with make_feature_source(cfg, ds) as src:
            loader = DGLDataLoader(ds, None, NeighborSampler(ds, FANOUTS, 64), src, cfg=cfg, rank=rank, world_size=2)
            got.append(np.concatenate([s.numpy() for _, s, _, _ in loader]))
    assert len(got[0]) == len(got[1]) == len(train_ids) // 2
    assert not set(got[0]) & set(got[1]) and set(got[0]) | set(got[1]) <= set(train_ids)


def test_the_record_is_lsm_gnn_trains_and_validates(ds, tmp_path):
    from lsm_gnn.train.loop import run_training

    cfg = cfg_for(ds, True, **{"train.epochs": 1, "train.eval": False, "train.timed_iters": 4})
    ref = run_training(cfg, progress=False)
    with make_feature_source(cfg, ds) as src:
        loader = DGLDataLoader(ds, None, NeighborSampler(ds, FANOUTS, 64), src, cfg=cfg)
        train(loader, ds.feature_array())
        loader.record(tmp_path / "run.json")
    rec = read_record(tmp_path / "run.json")
    assert rec["kind"] == ref["kind"] == "train" and rec["system"] == ref["system"] == "lsm"
    assert set(ref["metrics"]) <= set(rec["metrics"]) | {"accuracy"}
    assert set(ref["metrics"]["time"]) == set(rec["metrics"]["time"])
    assert rec["metrics"]["pipeline"]["loader"] == "dgl" and len(rec["epochs"][0]["losses"]) == 4
    # the same batches, the same cache: the rows of the train loop's timed window
    assert rec["metrics"]["rows"] == ref["metrics"]["rows"]


def test_bad_graphs_samplers_and_seeds_are_refused_by_name(ds):
    cfg = cfg_for(ds, False)
    with make_feature_source(cfg, ds) as src:
        with pytest.raises(InputError, match="graph: expected a dgl.DGLGraph"):
            DGLDataLoader("not a graph", None, None, src, cfg=cfg)
        with pytest.raises(InputError, match="sampler: expected a DGL block sampler"):
            DGLDataLoader(ds, None, object(), src, cfg=cfg)
        with pytest.raises(InputError, match="seeds: expected a 1-D array"):
            DGLDataLoader(ds, np.zeros((2, 2), np.int64), dgl.dataloading.NeighborSampler(FANOUTS), src, cfg=cfg)


# ---- 2 ranks, one shared cache ------------------------------------------------------------------------
def shared_worker(cfg, rank, world_size, heartbeat, args):
    """A rank of the user's script under torch.distributed: its source from the one factory
    (the shared cache), the DGL loader, a stock SAGE in DDP."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    from lsm_gnn.datasets.format import Dataset
    from lsm_gnn.ranks.workers import source_metrics

    ds = Dataset(cfg.dataset.path)
    truth = ds.feature_array()
    src = make_feature_source(cfg, ds, rank, world_size, heartbeat=heartbeat)
    try:
        loader = DGLDataLoader(ds, None, NeighborSampler(ds, FANOUTS, 64), src, cfg=cfg, max_iters=8)
        torch.manual_seed(0)
        model = DDP(SAGE(16, 16, 5))
        opt = torch.optim.Adam(model.parameters(), lr=0.01)
        mismatched, seeds = 0, []
        for input_nodes, s, blocks, x in loader:
            mismatched += int((x.numpy() != truth[input_nodes.numpy()]).any(axis=1).sum())
            seeds.extend(s.tolist())
            loss = F.cross_entropy(model(blocks, x), blocks[-1].dstdata["label"])
            opt.zero_grad()
            loss.backward()
            opt.step()
        merged = loader.record()
        own = loader.stats()
    finally:
        src.close()
    return {"record": {"metrics": own, "epochs": []}, "source": source_metrics(src), "mismatched": mismatched,
            "seeds": seeds, "merged_rows": merged["metrics"]["rows"], "rank": loader.rank}


@pytest.mark.slow
def test_two_ranks_share_one_cache_through_the_dgl_loader_and_get_the_files_rows(ds):
    from lsm_gnn.multidevice.owner_files import ensure_owner_files
    from lsm_gnn.ranks.spawn import run_ranks

    cfg = cfg_for(ds, True, **{"distributed.devices": 2, "distributed.mode": "shared", "cache.capacity_fraction": 0.05})
    ensure_owner_files(ds, 2, progress=False)
    results, failure, _ = run_ranks(cfg, f"{__name__}:shared_worker", {})
    assert failure is None, failure
    assert [r["rank"] for r in results] == [0, 1]
    assert all(r["mismatched"] == 0 for r in results)
    train_ids = np.asarray(ds.split("train"))
    for r in results:
        dealt = deal_seeds(train_ids, 0, seed=3, shuffle=True, rank=r["rank"], world_size=2)
        assert r["seeds"] == dealt[:8 * 64].tolist()
    # one cache over both devices: rows come from the peer, and every rank's record is the merged one
    rows = [r["record"]["metrics"]["rows"] for r in results]
    assert sum(x["peer_hits"] for x in rows) > 0
    assert all(r["merged_rows"]["requests"] == sum(x["requests"] for x in rows) for r in results)
    assert sum(int(r["source"]["stats"].get("exchange_bytes", 0)) for r in results) > 0
