import json

import numpy as np
import pytest

from lsm_gnn.config import load_config
from lsm_gnn.datasets.format import Dataset, row_stride_for
from lsm_gnn.records import new_record, read_record, write_record
from lsm_gnn.utils.errors import ConfigError, DataError


def test_config_defaults_and_overrides():
    cfg = load_config(None, ["cache.policy=static", "sampler.fanouts=[5, 5]"])
    assert cfg.cache.policy == "static"
    assert cfg.sampler.fanouts == [5, 5]


@pytest.mark.parametrize("override,key", [
    ("cache.polcy=hybrid", "cache.polcy"),
    ("cache.ways=0", "cache.ways"),
    ("train.epochs=two", "train.epochs"),
    ("cache.policy=belady", "cache.policy"),
])
def test_config_errors_name_the_key(override, key):
    with pytest.raises(ConfigError) as e:
        load_config(None, [override])
    assert e.value.key == key


def test_config_file_errors(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("cache:\n  window: -3\n")
    with pytest.raises(ConfigError, match=r"c.yaml: cache.window"):
        load_config(p)
    p.write_text("cache: [1, 2\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(p)


def test_row_stride():
    assert row_stride_for(4096) == 4096
    assert row_stride_for(512) == 512
    assert row_stride_for(1536) == 1536
    assert row_stride_for(600) == 1024
    assert row_stride_for(100) == 128


def test_dataset_roundtrip(random_dataset):
    ds = random_dataset(num_nodes=300, dim=100)
    lay = ds.features()
    assert lay.row_stride == 512 and lay.file_bytes % 4096 == 0
    feats = ds.feature_array()
    assert feats.shape == (300, 100)
    indptr, indices = ds.csc("paper__cites__paper")
    assert indptr[-1] == len(indices) == ds.num_edges()
    assert np.all(np.diff(indptr) >= 0)
    assert len(ds.split("train")) == 180


def test_dataset_bad_metadata(tmp_path, random_dataset):
    with pytest.raises(DataError, match="metadata.json"):
        Dataset(tmp_path)
    ds = random_dataset(num_nodes=50)
    meta = json.loads((ds.root / "metadata.json").read_text())
    meta["format_version"] = 99
    (ds.root / "metadata.json").write_text(json.dumps(meta))
    with pytest.raises(DataError, match="format_version"):
        Dataset(ds.root)


def test_record_roundtrip_and_validation(tmp_path):
    rec = new_record("train", "lsm", {"a": 1})
    rec["metrics"] = {"rows": {"requests": 10, "storage_rows": 3}}
    p = write_record(tmp_path / "r.json", rec)
    assert read_record(p)["system"] == "lsm"
    rec["metrics"]["rows"]["requests"] = -1
    with pytest.raises(DataError, match="metrics/rows/requests"):
        write_record(tmp_path / "bad.json", rec)
    assert not (tmp_path / "bad.json").exists()
