"""Every rule about a record has one definition (lsm_gnn.records): the cold and steady epochs, the
hit rates, the rows summed over ranks. The loop, the Dist-DGL harness, the merge over ranks and the
simulator give the same figures for the same epochs and counts."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from baselines.harness import distdgl_record
from lsm_gnn.config import CacheConfig, load_config, parse_config
from lsm_gnn.ranks.launch import run_head
from lsm_gnn.ranks.merge import merge_records
from lsm_gnn.metrics import (ROW_KEYS, distinct_hit_rate, epoch_times, hit_rate, hit_rates, served_rows,
    steady_epochs, sum_counts)
from lsm_gnn.records import validate_record
from lsm_gnn.sim.simulate import simulate
from lsm_gnn.sim.trace import Trace
from lsm_gnn.train.loop import run_training

REPO = Path(__file__).resolve().parents[1]
MEMORY = {"cache_bytes": 1, "victim_bytes": 0, "total_bytes": 1, "fraction_of_features": 0.1}

# (train.epochs, warmup_iters, timed_iters): whole epochs; one timed epoch after a warm-up (its window
# is the steady epoch, its cold time the estimate over all its iterations)
CASES = {"three whole epochs": (3, 0, None), "one timed epoch after warm-up": (1, 2, 3)}


def _loop_record(ds, epochs, warmup, timed):
    over = {"dataset.path": str(ds.root), "storage.reader": "buffered", "cache.enabled": True,
            "cache.capacity_fraction": 0.2, "sampler.batch_size": 64, "sampler.fanouts": [4, 4],
            "train.epochs": epochs, "train.warmup_iters": warmup, "train.threads": 1,
            "train.accelerator": "emulated", "train.accelerator_scale": 0.01}
    if timed is not None:
        over["train.timed_iters"] = timed
    cfg = load_config(None, over)
    return cfg, run_training(cfg, progress=False)


def _distdgl_trainer(loop_rec, warmup, timed):
    """One Dist-DGL trainer's measurements whose epochs took what the loop's epochs took."""
    P = loop_rec["metrics"]["time"]["timed_window"]["iterations_per_epoch"]
    iterations, walls = [], []
    for ep in loop_rec["epochs"]:
        n = ep["iterations"]
        if timed is None:  # whole epochs: the epoch's wall time
            totals = [ep["time_s"] / n] * n
        else:  # the window's mean step makes epoch_s, all steps' mean the cold estimate
            m, c = ep["epoch_s"] / P, ep["cold_estimate_s"] / P
            a = ((warmup + timed) * c - timed * m) / warmup
            totals = [a] * warmup + [m] * timed
        walls.append(ep["time_s"])
        iterations += [{"epoch": ep["epoch"], "step": s, "total": t, "sample": 0.0, "fetch": 0.0, "train": t,
                        "convert": 0.0, "feature_bytes": 0, "input_rows": 10, "seeds": 1, "edges": 0}
                       for s, t in enumerate(totals)]
    return {"iters_per_epoch": P, "warmup_iters": warmup, "timed_iters": timed, "epoch_walls": walls,
            "losses": [], "iterations": iterations, "startup": {"initialize_s": 0.0, "setup_s": 0.0},
            "accuracy": {"val": None, "test": None}, "part_id": 0, "num_train_nids": 1, "local_rank": 0,
            "net_start": None, "net_end": None}


@pytest.mark.parametrize("case", CASES)
def test_the_loop_the_harness_and_the_merge_agree_on_the_cold_and_steady_epochs(random_dataset, case):
    epochs, warmup, timed = CASES[case]
    ds = random_dataset(num_nodes=1500, dim=16)
    cfg, loop = _loop_record(ds, epochs, warmup, timed)
    t = loop["metrics"]["time"]
    steady = steady_epochs(epochs, timed=timed is not None, warmup_iters=warmup)
    assert t["timed_window"]["steady_epochs"] == steady == ([1, 2] if epochs == 3 else [0])
    eps = loop["epochs"]
    cold = eps[0]["epoch_s"] if epochs > 1 else eps[0]["cold_estimate_s"]
    assert t["epoch_cold_s"] == pytest.approx(cold)
    assert t["epoch_steady_s"] == pytest.approx(np.mean([eps[i]["epoch_s"] for i in steady]))

    spec = SimpleNamespace(machines=1, trainers=1, servers=1, samplers=0, network="loopback")
    info = SimpleNamespace(preprocessing_s=0.0, partition_s=0.0, load_s=0.0, as_dict=lambda: {})
    dgl = distdgl_record(cfg, info, spec, [_distdgl_trainer(loop, warmup, timed)], 1.0)
    d = dgl["metrics"]["time"]
    assert d["timed_window"]["steady_epochs"] == steady
    assert d["epoch_cold_s"] == pytest.approx(t["epoch_cold_s"])
    assert d["epoch_steady_s"] == pytest.approx(t["epoch_steady_s"])
    assert d["epoch_cold_s"] != pytest.approx(d["epoch_steady_s"]) or epochs == 1

    # two ranks stepping together: the slowest rank's epochs, the loop's rule either way
    two = parse_config({**json.loads(json.dumps(loop["config"])), "distributed": {"devices": 2}})
    slower = json.loads(json.dumps(loop))
    for key in ("epoch_cold_s", "epoch_steady_s"):
        slower["metrics"]["time"][key] *= 2
    ranks = [{"record": loop, "source": {"rows": {}, "stats": {}, "memory": MEMORY}},
             {"record": slower, "source": {"rows": {}, "stats": {}, "memory": MEMORY}}]
    merged = merge_records(run_head(two), ranks, "train", 1.0)["metrics"]["time"]
    assert merged["epoch_cold_s"] == pytest.approx(2 * t["epoch_cold_s"])
    assert merged["epoch_steady_s"] == pytest.approx(2 * t["epoch_steady_s"])
    if timed is None:  # a trace replay's epochs (whole ones): the same rule over their seconds
        replay = [{"source": {"rows": {}, "stats": {}, "memory": MEMORY},
                   "epochs": [{"epoch": e["epoch"], "seconds": e["epoch_s"]} for e in eps]}] * 2
        r = merge_records(run_head(two), replay, "bench", 1.0)["metrics"]["time"]
        assert (r["epoch_cold_s"], r["epoch_steady_s"]) == pytest.approx((t["epoch_cold_s"], t["epoch_steady_s"]))


def test_a_single_untimed_epoch_has_no_steady_epoch():
    assert steady_epochs(1) == [] and steady_epochs(1, timed=True, warmup_iters=0) == []
    times = epoch_times([{"epoch_s": 4.0}])
    assert times == {"epoch_cold_s": 4.0, "epoch_steady_s": None}
    assert epoch_times([]) == {"epoch_cold_s": None, "epoch_steady_s": None}


def test_the_loop_and_the_merge_state_hit_rates_per_request_and_sum_rows_over_ranks(random_dataset):
    ds = random_dataset(num_nodes=1500, dim=16)
    cfg, loop = _loop_record(ds, 2, 0, None)
    rows = loop["metrics"]["rows"]
    rates = loop["metrics"]["hit_rate"]
    assert rates == hit_rates(rows)
    assert rows["distinct"] > rows["storage_rows"] > 0  # some rows hit, some were read
    assert rates["local"] + rates["peer"] + rates["victim"] == pytest.approx(hit_rate(rows))
    # the same rows served, two denominators: requests and distinct rows (the simulator's trace
    # below has duplicates in its batches; a sampler's input nodes have none)
    assert hit_rate(rows) * rows["requests"] == pytest.approx(distinct_hit_rate(rows) * rows["distinct"])
    assert served_rows(rows) == rows["distinct"] - rows["storage_rows"]

    other = json.loads(json.dumps(loop))
    other["metrics"]["rows"] = {k: v // 2 for k, v in rows.items()}
    other["metrics"]["ranks"] = {"1": other["metrics"]["ranks"]["0"]}
    two = parse_config({**json.loads(json.dumps(loop["config"])), "distributed": {"devices": 2}})
    merged = merge_records(run_head(two), [{"record": r, "source": {"rows": {}, "stats": {}, "memory": MEMORY}}
                                 for r in (loop, other)], "train", 1.0)
    total = sum_counts([rows, other["metrics"]["rows"]], ROW_KEYS)
    assert {k: merged["metrics"]["rows"][k] for k in ROW_KEYS} == total
    assert merged["metrics"]["hit_rate"] == hit_rates(total)
    validate_record(merged)


def test_the_simulator_divides_by_requests_and_a_replay_by_distinct_rows():
    rng = np.random.default_rng(3)
    n = 400
    batches = [[rng.zipf(1.3, 80) % n] for _ in range(12)]
    trace = Trace(1, n, batches, {"batches_per_epoch": [12]})
    cfg = CacheConfig(policy="hybrid", capacity_fraction=0.2, window=4, ways=4)
    row = simulate(trace, [cfg], static_scores=np.zeros(n, np.uint8), mode="shared").iloc[0]
    assert row["requests"] > row["distinct"]
    assert row["hit_rate"] == pytest.approx((row["hits"] + row["victim_hits"]) / row["requests"])

    from lsm_gnn.cache.budget import memory_budget
    from lsm_gnn.cache.replay import replay

    res = replay([b[0] for b in batches], cfg, n, np.zeros(n, np.uint8), budget=memory_budget(cfg, n, 4))
    t = res.totals
    assert res.distinct_hit_rate() == pytest.approx((t["hits"] + t["victim_hits"]) / t["distinct"])
    assert res.as_dict()["distinct_hit_rate"] == res.distinct_hit_rate() > row["hit_rate"]
    assert "hit_rate" not in res.as_dict()


# the rules each of these names is, written once: the metric vocabulary in lsm_gnn/metrics.py, the
# system name in lsm_gnn/records.py; the others are old copies that must not come back anywhere
HOME = {**dict.fromkeys(("ROW_KEYS", "IO_KEYS", "hit_rates", "hit_rate", "distinct_hit_rate", "steady_epochs",
                         "measured_epochs", "epoch_times", "timed_iterations", "bound_stage"), "lsm_gnn/metrics.py"),
        "system_name": "lsm_gnn/records.py"}
GONE = {"_hit_rates", "_exposed", "_hidden_fraction", "_window_iterations", "system"}


def test_the_record_rules_are_defined_once_in_their_home():
    found = []
    for path in [*(REPO / "lsm_gnn").rglob("*.py"), *(REPO / "baselines").rglob("*.py"),
                 *(REPO / "workflow" / "scripts").glob("*.py")]:
        for node in ast.parse(path.read_text()).body:  # module-level definitions
            names = []
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                names = [node.name]
            elif isinstance(node, ast.Assign):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            found += [(n, str(path.relative_to(REPO))) for n in names if n in HOME or n in GONE]
    assert sorted(found) == sorted(HOME.items())


def test_a_record_written_before_the_window_names_were_told_apart_is_read_the_same():
    from lsm_gnn.metrics import record_measured_epochs, timed_iterations, timed_window

    block = {"full_epoch": False, "warmup_iters": 2, "timed_iters": 3, "iterations_run_per_epoch": 5,
             "steady_epochs": [1]}
    new = {"epochs": [{}, {}], "metrics": {"time": {"timed_window": block}}}
    old = {"epochs": [{}, {}], "metrics": {"time": {"timing_window": block}}}
    assert timed_window(old["metrics"]["time"]) == timed_window(new["metrics"]["time"]) == block
    assert timed_window({}) == {} and timed_window(None) == {}
    assert timed_iterations(old) == timed_iterations(new) == 2 * (5 - 2)
    assert record_measured_epochs(old) == record_measured_epochs(new) == [1]


def test_a_dist_dgl_record_says_how_much_longer_the_slowest_trainers_work_before_the_all_reduce_is_than_the_mean(
        random_dataset):
    """Per timed step each trainer's total less its sync (the wait for the others): the projection's
    wait for the slowest trainer (lsm_gnn.project.counts.straggler_of)."""
    ds = random_dataset(num_nodes=200, dim=8)
    cfg = load_config(None, {"dataset.path": str(ds.root), "train.warmup_iters": 1, "train.timed_iters": 2,
                             "train.epochs": 1})

    def trainer(rank, works):  # 1 warm-up step (ignored) + 2 timed; everyone's step ends with the slowest
        its = [{"epoch": 0, "step": s, "total": 0.5, "sync": 0.5 - w, "sample": 0.0, "fetch": w, "train": 0.0,
                "convert": 0.0, "feature_bytes": 0, "input_rows": 10, "seeds": 1, "edges": 0}
               for s, w in enumerate(works)]
        return {"iters_per_epoch": 3, "warmup_iters": 1, "timed_iters": 2, "epoch_walls": [1.5], "losses": [],
                "iterations": its, "startup": {"initialize_s": 0.0, "setup_s": 0.0},
                "accuracy": {"val": None, "test": None}, "part_id": rank // 2, "num_train_nids": 1,
                "local_rank": rank % 2, "net_start": None, "net_end": None}

    spec = SimpleNamespace(machines=1, trainers=2, servers=1, samplers=0, network="loopback")
    info = SimpleNamespace(preprocessing_s=0.0, partition_s=0.0, load_s=0.0, as_dict=lambda: {})
    rec = distdgl_record(cfg, info, spec, [trainer(0, [9.0, 0.4, 0.2]), trainer(1, [0.1, 0.2, 0.2])], 1.0)
    tw = rec["metrics"]["distdgl"]["trainer_work_s"]
    # timed steps: (0.4, 0.2) and (0.2, 0.2): slowest 0.4 and 0.2, mean 0.3 and 0.2
    assert tw["steps"] == 2 and tw["slowest_s"] == pytest.approx(0.3) and tw["mean_s"] == pytest.approx(0.25)
    assert tw["slowest_over_mean"] == pytest.approx(1.2)
    one = distdgl_record(cfg, info, SimpleNamespace(**{**vars(spec), "trainers": 1}), [trainer(0, [1, 1, 1])], 1.0)
    assert one["metrics"]["distdgl"]["trainer_work_s"] is None   # one trainer waits for no one
