"""Every number in its type: each config key and CLI option has its range, 0 where 0 means nothing
is an error naming the key (never a default put in its place), no setting or metadata field is
infinite, and a capacity beyond this machine's memory is refused naming the key before allocation."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lsm_gnn.config import load_config
from lsm_gnn.utils.errors import ConfigError, DataError

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("setting, key", [
    ("train.seed=-1", "train.seed"), ("train.seed=4294967296", "train.seed"),
    ("train.seed=99999999999999999999", "train.seed"),
    ("distributed.timeout_s=.inf", "distributed.timeout_s"), ("baseline.timeout_s=1e400", "baseline.timeout_s"),
    ("train.lr=.nan", "train.lr"), ("emulation.time_scale=.inf", "emulation.time_scale"),
    ("cache.capacity_bytes=1000000000000000000000000", "cache.capacity_bytes"),
    ("baseline.page_cache_budget_bytes=1e400", "baseline.page_cache_budget_bytes"),
    ("sampler.batch_size=0", "sampler.batch_size"), ("distributed.devices=0", "distributed.devices"),
    ("train.epochs=0", "train.epochs"), ("train.threads=100000000000000000000", "train.threads"),
    ("sampler.fanouts=[100000000000000000000,2]", "sampler.fanouts"),
    ("cache.refresh_every=1e400", "cache.refresh_every"),
    ("train.eval_nodes=100000000000000000000", "train.eval_nodes"),
])
def test_a_number_outside_its_type_is_an_error_naming_the_key(setting, key):
    with pytest.raises(ConfigError) as e:
        load_config(None, [setting])
    assert e.value.key == key


def test_the_largest_seed_numpy_takes_is_accepted():
    assert load_config(None, ["train.seed=4294967295"]).train.seed == 2**32 - 1


def test_a_capacity_beyond_this_machines_memory_is_refused_naming_the_key_before_allocation(tiny):
    from lsm_gnn.datasets.format import Dataset
    from lsm_gnn.sources.factory import make_feature_source
    from lsm_gnn.utils.bounds import memory_bytes

    cfg = load_config(str(REPO / "lsm_gnn/configs/lsm.yaml"),
                      [f"dataset.path={tiny}", f"cache.capacity_bytes={memory_bytes() * 4}"])
    with pytest.raises(ConfigError) as e:
        make_feature_source(cfg, Dataset(tiny))
    assert e.value.key == "cache.capacity_bytes" and "more than this machine's memory" in str(e.value)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from lsm_gnn.datasets.synthetic import generate

    out = tmp_path_factory.mktemp("num") / "ds"
    generate(out, "400", feature_dim=8, progress=False)
    return out


@pytest.mark.parametrize("field, value", [("num_rows", "1e400"), ("dim", "16.5"), ("row_stride", "-1"),
                                          ("file_bytes", "1e400")])
def test_a_metadata_number_outside_its_type_is_refused_on_open_naming_the_field(tiny, tmp_path, field, value):
    from lsm_gnn.datasets.format import Dataset

    ds = tmp_path / "ds"
    shutil.copytree(tiny, ds)
    meta = (ds / "metadata.json").read_text()
    old = json.loads(meta)["features"][field]
    (ds / "metadata.json").write_text(meta.replace(f'"{field}": {old}', f'"{field}": {value}', 1))
    with pytest.raises(DataError) as e:
        Dataset(ds)
    assert "metadata.json" in str(e.value) and field in str(e.value)


def cli(*args):
    env = dict(os.environ, DGLBACKEND="pytorch", PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "lsm_gnn.cli", *map(str, args)], env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.parametrize("option", ["--batch-size", "--devices", "--epochs", "--max-batches"])
def test_simulate_with_zero_where_zero_means_nothing_is_refused_not_replaced(tiny, option):
    proc = cli("simulate", tiny, "--trace-only", "--max-batches", "1", "--fanouts", "2,2", option, "0")
    assert proc.returncode == 2 and option in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("command", [["dataset", "generate", "300", "--dim", "8", "--no-progress"],
                                     ["simulate", "--trace-only", "--max-batches", "1", "--fanouts", "2,2"]])
def test_a_seed_beyond_numpy_s_range_is_a_usage_error_naming_the_option(tiny, tmp_path, command):
    args = command + (["--out", tmp_path / "g"] if command[0] == "dataset" else [])
    if command[0] == "simulate":
        args.insert(1, str(tiny))
    for seed in ("-1", str(2**32)):
        proc = cli(*args, "--seed", seed)
        assert proc.returncode == 2 and "--seed" in proc.stderr and "Traceback" not in proc.stderr


def test_simulate_never_puts_a_fraction_of_its_own_in_place_of_a_configs_capacity_in_bytes(tiny, tmp_path):
    cfg = tmp_path / "bytes.yaml"
    cfg.write_text("cache:\n  capacity_fraction: null\n  capacity_bytes: 100000\n")
    proc = cli("simulate", tiny, "--config", cfg, "--max-batches", "1", "--fanouts", "2,2", "--policy", "hybrid")
    assert proc.returncode != 0 and "cache.capacity_bytes" in proc.stderr and "--cache-fraction" in proc.stderr
