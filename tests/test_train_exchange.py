"""The shared cache's exchange is timed as stages of its own (`exchange_ids`, `exchange_rows`), not
folded into the fetch: the loader splits each fetch's wall time over the cache's and the exchange's
stages (their sum stays the wall time), a 2-device LSM-GNN record carries them, and the verdict on
the communication layer's overhead (claim (e), workflow/scripts/verdicts.py) reads them."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from lsm_gnn.config import load_config, parse_config
from lsm_gnn.metrics import EXCHANGE_STAGES, FETCH_BUSY_STAGES, bound_stage
from lsm_gnn.records import validate_record
from lsm_gnn.train.loader import fetch_split

CACHE_ONLY = SimpleNamespace(fetch_stage="fetch_cache")   # a cache: its stages, no exchange
OVER_STORE = SimpleNamespace(fetch_stage="fetch_storage")  # a shared source over a plain store


def split_before_the_exchange(seconds, before, after):
    """fetch_split as it was before the exchange had stages of its own: the reference that a source
    without exchange timers must still match, number for number."""
    victim, storage = (max(0.0, after.get(k, 0.0) - before.get(k, 0.0)) for k in ("victim", "storage"))
    if victim + storage > seconds:
        f = seconds / (victim + storage)
        victim, storage = victim * f, storage * f
    return {"fetch_cache": seconds - victim - storage, "fetch_victim": victim, "fetch_storage": storage}


def timers(rng, exchange: bool) -> tuple[dict, dict]:
    """Cumulative stage seconds of a source before and after one fetch."""
    keys = ("cache", "victim", "storage") + (EXCHANGE_STAGES if exchange else ())
    before = {k: float(rng.uniform(0, 5)) for k in keys}
    return before, {k: v + float(rng.uniform(0.002, 0.01)) for k, v in before.items()}


def test_a_fetch_without_exchange_timers_splits_exactly_as_before():
    rng = np.random.default_rng(0)
    for _ in range(200):
        before, after = timers(rng, exchange=False)
        # wall times longer and shorter than the timers (then they are scaled down to it)
        for seconds in (float(rng.uniform(0.02, 0.05)), float(rng.uniform(0, 0.01))):
            assert fetch_split(CACHE_ONLY, seconds, before, after) == split_before_the_exchange(seconds, before, after)
    assert fetch_split(OVER_STORE, 0.25, None, None) == {"fetch_storage": 0.25}   # no timers: one stage


def test_a_fetch_with_exchange_timers_gives_them_their_stages_and_still_sums_to_its_wall_time():
    rng = np.random.default_rng(1)
    for _ in range(200):
        before, after = timers(rng, exchange=True)
        delta = {k: after[k] - before[k] for k in after}
        seconds = float(rng.uniform(0.05, 0.1))   # longer than the timers together: kept as they are
        got = fetch_split(CACHE_ONLY, seconds, before, after)
        assert set(got) == set(FETCH_BUSY_STAGES)
        assert all(got[k] == delta[k] for k in EXCHANGE_STAGES)
        assert got["fetch_victim"] == delta["victim"] and got["fetch_storage"] == delta["storage"]
        assert sum(got.values()) == pytest.approx(seconds, rel=1e-12)
        short = float(rng.uniform(0, 0.005))      # shorter: every timed stage scaled by one factor
        got = fetch_split(CACHE_ONLY, short, before, after)
        timed = [k for k in FETCH_BUSY_STAGES if k != "fetch_cache"]
        scale = got["exchange_rows"] / delta["exchange_rows"]
        assert scale < 1 and got["exchange_ids"] == pytest.approx(delta["exchange_ids"] * scale, rel=1e-12)
        assert sum(got[k] for k in timed) == pytest.approx(short, rel=1e-12)
        assert abs(got["fetch_cache"]) <= 1e-12 and sum(got.values()) == pytest.approx(short, rel=1e-12)


def test_an_exchange_over_an_owner_without_timers_leaves_the_rest_to_the_owners_stage():
    before, after = {"exchange_ids": 1.0, "exchange_rows": 2.0}, {"exchange_ids": 1.25, "exchange_rows": 2.5}
    assert fetch_split(OVER_STORE, 1.0, before, after) == {"fetch_storage": 0.25, "exchange_ids": 0.25,
                                                           "exchange_rows": 0.5}


def test_the_lookaheads_id_exchange_counts_in_exchange_ids_and_its_bookkeeping_does_not(random_dataset, tmp_path):
    import torch.distributed as dist

    from lsm_gnn.multidevice.exchange import Exchange
    from lsm_gnn.sources.factory import make_feature_source
    from lsm_gnn.sources.shared import SharedCacheFeatureSource

    ds = random_dataset(num_nodes=600, dim=8, seed=4)
    cfg = load_config(None, {"dataset.path": str(ds.root), "storage.reader": "buffered",
                             "storage.drop_page_cache": False, "cache.enabled": True,
                             "cache.capacity_fraction": 0.2, "cache.window": 2})
    rng = np.random.default_rng(2)
    batches = [rng.integers(0, 600, 50) for _ in range(4)]
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'pg'}", rank=0, world_size=1)
    try:
        cache = make_feature_source(cfg, ds, 0, 1)
        src = SharedCacheFeatureSource(cache, Exchange(0, 1), num_rows=600, row_dim=8, dtype=np.float32,
                                       max_horizon=2)
        src.advance(batches[1:3])
        s = src.stage_seconds()
        assert s["exchange_ids"] == src.times["window_exchange_ids"] > 0 and s["exchange_rows"] == 0.0
        assert s["exchange_ids"] < src.times["window"]   # the window's bookkeeping stays out
        assert src.times["exchange_ids"] == 0.0           # the fetch's own timer is untouched
        src.fetch(batches[0])
        s = src.stage_seconds()
        assert s["exchange_ids"] == src.times["exchange_ids"] + src.times["window_exchange_ids"]
        assert s["exchange_rows"] == src.times["exchange_rows"] > 0
        assert {k: s[k] for k in ("cache", "victim", "storage")} == cache.stage_seconds()
        assert src.stats()["window_exchange_ids_s"] == src.times["window_exchange_ids"]
        src.close()
    finally:
        dist.destroy_process_group()


# ---- a 2-device LSM-GNN training run ----------------------------------------------------------------
FRACTION = 0.2


@pytest.fixture(scope="module")
def shared_run(tmp_path_factory):
    """Two gloo ranks train (emulated a100 steps) over the shared cache; every fetch's split kept."""
    import conftest

    from lsm_gnn.ranks.launch import run_multi_device

    root = tmp_path_factory.mktemp("exchange")
    ds = conftest._build_random_dataset(root / "ds", num_nodes=2500, dim=16, seed=5)
    cfg = parse_config({"dataset": {"path": str(ds.root)},
                        "storage": {"reader": "buffered", "drop_page_cache": False},
                        "cache": {"enabled": True, "capacity_fraction": FRACTION, "window": 3},
                        "sampler": {"batch_size": 64, "fanouts": [3, 3]},
                        "train": {"threads": 1, "epochs": 1, "warmup_iters": 2, "timed_iters": 8, "eval": False,
                                  "accelerator": "emulated", "accelerator_profile": "a100"},
                        "distributed": {"devices": 2, "mode": "shared"}})
    (root / "splits").mkdir()
    rec = run_multi_device(cfg, worker="exchange_probe:recording_splits", progress=False,
                           worker_args={"out": str(root / "splits")})
    splits = [json.loads((root / "splits" / f"{r}.json").read_text()) for r in range(2)]
    return rec, splits, root


def test_a_two_device_shared_cache_record_times_the_exchange_apart_and_each_fetch_still_sums(shared_run):
    rec, splits, _ = shared_run
    validate_record(rec)
    assert rec["system"] == "lsm" and rec["metrics"]["traffic"]["device_exchange_bytes"] > 0
    t = rec["metrics"]["time"]
    for rank, kept in enumerate(splits):
        assert len(kept) == rec["epochs"][0]["iterations"] == 10   # warm-up + timed, a fetch each
        for fetch in kept:
            assert set(fetch["stages"]) == set(FETCH_BUSY_STAGES)
            assert all(fetch["stages"][k] > 0 for k in EXCHANGE_STAGES)
            assert sum(fetch["stages"].values()) == pytest.approx(fetch["seconds"], rel=1e-9)
        # the record's stage means are the timed fetches' (after the warm-up)
        per = rec["metrics"]["ranks"][str(rank)]["time"]["per_iteration"]
        for k in FETCH_BUSY_STAGES:
            assert per[k] == pytest.approx(np.mean([f["stages"][k] for f in kept[2:]]), rel=1e-9)
    assert t["per_iteration"]["exchange_ids"] > 0 and t["per_iteration"]["exchange_rows"] > 0
    # the exchange is loading work: the exposed view gives it its share of the wait
    assert set(EXCHANGE_STAGES) <= set(t["per_iteration_exposed"])
    assert 0.0 <= t["hidden_fetch_fraction"] <= 1.0 and bound_stage(rec) is not None


def test_the_communication_verdict_decides_from_records_with_exchange_stages(shared_run):
    """End to end: the run's record (twice, as two repeats) through the baselines report's table
    and ratios and the verdicts' inputs to claim (e), which now decides."""
    scripts = str(Path(__file__).resolve().parents[1] / "workflow/scripts")
    if scripts not in sys.path:
        sys.path.insert(0, scripts)
    import baselines_report
    import verdicts as V
    import verdicts_report

    rec, _, root = shared_run
    runs = root / "baselines"
    runs.mkdir(exist_ok=True)
    (runs / "lsm-d2-c0.2-a100-r0.json").write_text(json.dumps(rec))
    shutil.copy(runs / "lsm-d2-c0.2-a100-r0.json", runs / "lsm-d2-c0.2-a100-r1.json")
    df = baselines_report.rows(sorted(runs.glob("*.json")), 16 * 4)
    share = baselines_report.ratios(df, FRACTION)["lsm_exchange_share"]
    assert share["runs"] == 2 and 0 < share["min"] == share["max"] < 1 and share["exchange_bytes"] > 0
    v = V.claim_e(verdicts_report.comm_inputs(baselines_report.ratios(df, FRACTION), None))
    assert v["verdict"] in (V.HOLDS, V.NO_VERDICT), v["why"]
