"""The scaling figure's points (workflow/scripts/wfcommon.py: scaling_points), from the simulator's
own shared- and isolated-cache replays over G = 1, 2, 4 devices at the same memory per device."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from lsm_gnn.config import CacheConfig
from lsm_gnn.sim.simulate import simulate
from lsm_gnn.sim.trace import Trace
from sim_standins import lru_replay

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow" / "scripts"))
from wfcommon import scaling_points  # noqa: E402


def trace(devices: int, seed=0, n=400, nb=25, batch=40) -> Trace:
    """Every device draws its own skewed batches over the same rows (a sampler's hot rows)."""
    rng = np.random.default_rng(seed)
    batches = [[rng.zipf(1.3, batch) % n for _ in range(devices)] for _ in range(nb)]
    return Trace(devices, n, batches, {"batches_per_epoch": [nb]})


@pytest.fixture(scope="module")
def replays():
    scores = np.zeros(400, np.uint8)
    cfg = [CacheConfig(policy="lru", capacity_fraction=0.05, ways=4)]
    return [simulate(trace(g), cfg, static_scores=scores, mode=mode, replay_fn=lru_replay)
            for g in (1, 2, 4) for mode in ("shared", "isolated")]


def test_storage_rows_are_counted_per_device_per_iteration(replays):
    pts = scaling_points(replays).set_index(["devices", "mode"])
    for df in replays:
        r = df.iloc[0]
        p = pts.loc[(int(r["devices"]), r["mode"])]
        assert p["storage_rows_per_device_iteration"] == pytest.approx(r["storage_rows"] / (r["devices"] * r["batches"]))
        assert p["min_rows_per_device_iteration"] == pytest.approx(r["min_rows"] / (r["devices"] * r["batches"]))
        assert p["hit_rate"] == r["hit_rate"]
        # no policy beats Belady MIN at the same memory
        assert p["min_rows_per_device_iteration"] <= p["storage_rows_per_device_iteration"]


def test_one_device_shared_and_isolated_are_the_same_cache(replays):
    pts = scaling_points(replays).set_index(["devices", "mode"])
    assert pts.loc[(1, "shared")].equals(pts.loc[(1, "isolated")])


def test_shared_caches_read_less_per_device_as_devices_are_added_and_isolated_do_not_gain(replays):
    pts = scaling_points(replays).set_index(["devices", "mode"])["storage_rows_per_device_iteration"]
    assert pts[(4, "shared")] < pts[(2, "shared")] < pts[(1, "shared")]
    assert pts[(4, "shared")] < pts[(4, "isolated")]
    # each isolated cache sees one device's stream of the same distribution: no gain from G
    assert pts[(4, "isolated")] == pytest.approx(pts[(1, "isolated")], rel=0.15)


def test_points_are_sorted_by_policy_mode_and_devices(replays):
    pts = scaling_points(reversed(replays))
    assert list(pts["devices"]) == [1, 2, 4, 1, 2, 4]
    assert list(pts["mode"]) == ["isolated"] * 3 + ["shared"] * 3
