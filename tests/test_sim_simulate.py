"""The simulator: cache streams per mode, replay + bounds table, trace generation, the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

import lsm_gnn.sim.generate as gen_mod
import lsm_gnn.sim.simulate as sim_mod
from lsm_gnn.cli import cli
from lsm_gnn.config import CacheConfig, VictimBufferConfig
from lsm_gnn.records import read_record
from lsm_gnn.sim.bounds import RequestSequence, belady_min
from lsm_gnn.sim.generate import generate_trace
from lsm_gnn.sim.simulate import cache_streams, headline, simulate
from lsm_gnn.sim.trace import Trace
from lsm_gnn.utils.errors import InputError
from sim_standins import StandInSampler, lru_replay


def two_device_trace(seed=0, n=300, nb=20):
    rng = np.random.default_rng(seed)
    batches = [[rng.zipf(1.3, 50) % n, rng.zipf(1.3, 50) % n] for _ in range(nb)]
    return Trace(2, n, batches, {"batches_per_epoch": [nb]})


def test_shared_streams_partition_by_owner_in_device_order():
    t = Trace(2, 10, [[np.array([1, 2, 3]), np.array([4, 3, 5])]], {})
    shared = cache_streams(t, "shared")
    assert [s.batches[0].tolist() for s in shared] == [[2, 4], [1, 3, 3, 5]]
    assert [(s.num_owners, s.owner) for s in shared] == [(2, 0), (2, 1)]
    isolated = cache_streams(t, "isolated")
    assert [s.batches[0].tolist() for s in isolated] == [[1, 2, 3], [4, 3, 5]]
    assert all(s.num_owners == 1 for s in isolated)
    with pytest.raises(InputError):
        cache_streams(t, "bogus")


def test_simulate_counts_bounds_and_ratios():
    t = two_device_trace()
    scores = np.zeros(t.num_rows, np.uint8)
    cfgs = [CacheConfig(policy=p, capacity_fraction=f, window=4, ways=4,
                        victim_buffer=VictimBufferConfig(depth=1))
            for p in ("lru", "static") for f in (0.05, 0.2)]
    df = simulate(t, cfgs, static_scores=scores, mode="shared", replay_fn=lru_replay)
    assert len(df) == 4
    assert (df["requests"] == t.total_requests()).all()
    assert (df["hits"] + df["victim_hits"] + df["storage_rows"] == df["distinct"]).all()
    assert (df["storage_rows"] >= df["min_rows"]).all()
    assert (df["min_cache_rows"] >= df["min_rows"]).all() and (df["min_set_rows"] >= df["min_cache_rows"]).all()
    assert (df["opt_static_rows"] >= df["min_rows"]).all() and (df["min_rows"] >= df["compulsory"]).all()
    assert (df["min_rows"] >= df["min_total_rows"]).all()  # partitioned memory never beats one of G*T
    assert np.allclose(df["storage_rows_vs_min"], df["storage_rows"] / df["min_rows"])
    # budgets of 15 and 60 rows, each less a host tier of 4 queues + a landing buffer of 1 line
    assert (df["victim_capacity"] == 5).all() and set(df["capacity_rows"]) == {10, 55}
    assert set(df["total_rows"]) == {15, 60}
    # the per-owner MIN is the sum over owners of MIN on each owner's stream
    owner_min = sum(belady_min(RequestSequence.from_batches(s.batches, t.num_rows), 15)
                    for s in cache_streams(t, "shared"))
    assert df.loc[0, "min_rows"] == owner_min
    head = headline(df)
    assert list(head["policy"]) == ["lru", "static"] and (head["cache_fraction"] == 0.05).all()


def test_shared_reads_no_more_than_isolated_at_the_floor():
    t = two_device_trace(seed=3)
    scores = np.zeros(t.num_rows, np.uint8)
    cfg = [CacheConfig(policy="lru", capacity_fraction=0.1, ways=4)]
    shared = simulate(t, cfg, static_scores=scores, mode="shared", replay_fn=lru_replay).iloc[0]
    iso = simulate(t, cfg, static_scores=scores, mode="isolated", replay_fn=lru_replay).iloc[0]
    assert shared["compulsory"] <= iso["compulsory"]
    assert shared["min_total_rows"] == iso["min_total_rows"]
    assert iso["requests"] == shared["requests"]


def test_simulate_rejects_bad_scores():
    t = two_device_trace()
    with pytest.raises(InputError):
        simulate(t, [CacheConfig()], static_scores=np.zeros(3, np.uint8), replay_fn=lru_replay)


def test_generate_trace_is_seeded_and_sharded(random_dataset, tmp_path):
    ds = random_dataset(num_nodes=500, dim=8)
    kw = dict(fanouts=[3], batch_size=64, seed=7, devices=2, epochs=2, sampler_factory=StandInSampler,
              progress=False)
    a = generate_trace(ds, **kw)
    b = generate_trace(ds, **kw)
    assert a.num_devices == 2 and a.meta["batches_per_epoch"] == [3, 3] and a.num_batches == 6
    assert all(np.array_equal(x, y) for ba, bb in zip(a.batches, b.batches) for x, y in zip(ba, bb))
    assert not np.array_equal(a.batches[0][0], a.batches[3][0])  # epochs reshuffle
    c = generate_trace(ds, **{**kw, "max_batches": 2, "epochs": 1})
    assert c.num_batches == 2 and c.meta["full_epoch_batches"] == 3
    a.save(tmp_path / "t.npz")
    back = Trace.load(tmp_path / "t.npz")
    assert back.meta == a.meta and np.array_equal(back.batches[5][1], a.batches[5][1])


def test_generate_trace_refuses_uneven_ranks(random_dataset):
    class Uneven(StandInSampler):
        def epoch(self, e):
            it = super().epoch(e)
            return it if self.rank == 0 else iter(list(it)[:-1])

    ds = random_dataset(num_nodes=300, dim=8)
    with pytest.raises(InputError, match="ran out"):
        generate_trace(ds, fanouts=[2], batch_size=50, devices=2, sampler_factory=Uneven, progress=False)


@pytest.fixture
def standins(monkeypatch):
    monkeypatch.setattr(gen_mod, "default_sampler_factory", lambda: StandInSampler)
    monkeypatch.setattr(sim_mod, "default_replay", lambda: lru_replay)


def test_cli_json_csv_record_and_trace_replay(random_dataset, tmp_path, standins):
    ds = random_dataset(num_nodes=600, dim=8)
    args = ["simulate", str(ds.root), "--fanouts", "4", "--batch-size", "100", "--devices", "2",
            "--policy", "lru", "--policy", "static", "--cache-fraction", "0.05", "--cache-fraction", "0.1",
            "--window", "4", "--save-trace", str(tmp_path / "t.npz"), "--out", str(tmp_path / "r.csv"),
            "--record", str(tmp_path / "rec.json"), "--json"]
    res = CliRunner().invoke(cli, args, catch_exceptions=False)
    out = json.loads(res.output)
    assert set(out["storage_rows_vs_min"]) == {"lru", "static"}
    assert out["headline"] == {"cache_fraction": 0.1, "window": 4}
    assert all(r >= 1.0 for r in out["storage_rows_vs_min"].values())
    assert len(out["results"]) == 4 and len(out["bounds"]) == 2
    rec = read_record(tmp_path / "rec.json")
    assert rec["kind"] == "simulate" and rec["metrics"]["storage_rows_vs_min"] == out["storage_rows_vs_min"]
    assert (tmp_path / "r.csv").read_text().startswith("policy,")
    # replaying the saved trace gives the same numbers; the table mode prints ratios
    again = CliRunner().invoke(cli, [*args[:2], "--trace", str(tmp_path / "t.npz"), *args[8:18], "--json"],
                               catch_exceptions=False)
    assert json.loads(again.output)["results"] == out["results"]
    table = CliRunner().invoke(cli, [*args[:2], "--trace", str(tmp_path / "t.npz"), "--policy", "lru"],
                               catch_exceptions=False)
    assert "/MIN" in table.output and "bounds" in table.output


def test_cli_rejects_mismatched_trace(random_dataset, tmp_path, standins):
    ds = random_dataset(num_nodes=200, dim=8)
    Trace(1, 999, [[np.array([1])]], {}).save(tmp_path / "t.npz")
    res = CliRunner().invoke(cli, ["simulate", str(ds.root), "--trace", str(tmp_path / "t.npz")])
    assert res.exit_code != 0 and "rows" in str(res.exception)


def test_generate_trace_with_the_training_sampler(random_dataset):
    """The real NeighborSampler: rank d's batches are the trace's device-d column."""
    from lsm_gnn.sampling import NeighborSampler

    ds = random_dataset(num_nodes=400, dim=8)
    t = generate_trace(ds, fanouts=[3, 2], batch_size=60, seed=2, devices=2, progress=False)
    s1 = NeighborSampler(ds, [3, 2], 60, seed=2, rank=1, world_size=2)
    expect = [mb.input_nodes for mb in s1.epoch(0)]
    assert t.num_batches == len(s1) == len(expect)
    assert all(np.array_equal(t.batches[b][1], expect[b]) for b in range(t.num_batches))
    assert t.meta["sampler"].endswith("NeighborSampler")


def test_simulate_reports_the_victim_buffers_spills_drops_and_prefetches_per_iteration():
    """hybrid with a victim buffer whose queues are too shallow for its spills: the dropped spills
    and the prefetched lines are in the result, per iteration and cache, and they add up."""
    t = two_device_trace(seed=5, n=400, nb=30)
    scores = np.random.default_rng(0).integers(0, 256, t.num_rows).astype(np.uint8)
    shallow = CacheConfig(policy="hybrid", capacity_fraction=0.2, window=4, ways=4,
                          victim_buffer=VictimBufferConfig(depth=1))
    off = CacheConfig(policy="hybrid", capacity_fraction=0.2, window=4, ways=4,
                      victim_buffer=VictimBufferConfig(enabled=False))
    df = simulate(t, [shallow, off], static_scores=scores, mode="shared")
    on, none = df.iloc[0], df.iloc[1]
    assert on["spill_dropped"] > 0 and on["spills"] > 0 and on["prefetched"] > 0
    per_it = t.num_batches * 2  # two caches (owners)
    assert on["spill_attempts_per_iteration"] == pytest.approx((on["spills"] + on["spill_dropped"]) / per_it)
    assert on["spill_dropped_per_iteration"] == pytest.approx(on["spill_dropped"] / per_it)
    assert on["prefetched_per_iteration"] == pytest.approx(on["prefetched"] / per_it)
    assert on["victim_hits"] <= on["prefetched"] <= on["spills"]
    assert none["spills"] == none["spill_dropped"] == none["prefetched"] == none["victim_hits"] == 0
