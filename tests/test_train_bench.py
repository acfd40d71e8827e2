"""`lsm-gnn bench train`: every system at every thread count, the headline ratio from each
system's best, and the equal-setting ratios beside it."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from lsm_gnn.cli import cli
from lsm_gnn.bench.train import _thread_counts


def test_bench_train_json_compares_each_system_at_its_best_thread_count(random_dataset):
    ds = random_dataset(num_nodes=1500, dim=64, seed=2)
    res = CliRunner().invoke(cli, ["bench", "train", str(ds.root), "--warmup", "1", "--timed", "2",
                                   "--batch-size", "64", "--fanouts", "4,4", "--hidden", "16",
                                   "--threads", "1,2", "--json", "--set", "cache.victim_buffer.host_fraction=0.2"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert set(out["by_threads"]) == {"1", "2"}
    systems = out["systems"]
    for name in ("memory", "lsm"):
        best = systems[name]
        assert out["best_threads"][name] == best["threads"] in (1, 2)
        # the best is the fastest of the thread counts
        times = [out["by_threads"][t][f"{name}_epoch_steady_s"] for t in ("1", "2")]
        assert best["epoch_steady_s"] == min(times)
    assert out["steady_epoch_vs_memory"] == pytest.approx(systems["lsm"]["epoch_steady_s"]
                                                          / systems["memory"]["epoch_steady_s"])
    for b in out["by_threads"].values():
        assert b["steady_epoch_vs_memory"] == pytest.approx(b["lsm_epoch_steady_s"] / b["memory_epoch_steady_s"])
    assert out["overrides"] == ["cache.victim_buffer.host_fraction=0.2"]
    assert out["timing_window"] == {"warmup_iters": 1, "timed_iters": 2, "extrapolated": True, "repeat": 1}
    assert systems["lsm"]["rows"]["storage_rows"] > 0 and systems["memory"]["rows"]["storage_rows"] == 0
    # 10 % of 1500 rows of 256 bytes per device, a fifth of it for the 8 queues + landing buffer
    mem = out["lsm_memory"]
    assert mem["total_bytes"] == 150 * 256 and mem["victim_bytes"] == 9 * (30 // 9) * 256
    assert systems["memory"]["memory"]["fraction_of_features"] == 1.0


def test_thread_counts_parse():
    assert _thread_counts("2,1,2") == [1, 2]
    with pytest.raises(Exception, match="positive"):
        _thread_counts("0,1")
    with pytest.raises(Exception, match="comma-separated"):
        _thread_counts("one")
    assert _thread_counts("auto")[0] == 1
