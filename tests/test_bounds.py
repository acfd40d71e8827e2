"""Inputs that state a size are checked before anything of that size is built: a YAML document's
aliases and keys (lsm_gnn.utils.yamlmodel.load_yaml), a .npy or .npz header (lsm_gnn.utils.bounds),
a node count or id. A crafted file of a few KB ends in an error naming the file and the field, never
in an allocation of terabytes, a hang or a message that echoes a huge value."""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numpy.lib import format as npf

from lsm_gnn.config import load_config
from lsm_gnn.utils.bounds import check_npz, memory_bytes, npy_header
from lsm_gnn.utils.errors import ConfigError, DataError
from lsm_gnn.utils.yamlmodel import MAX_VALUES, load_yaml


def laughs(levels: int = 9) -> str:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, levels + 1)]
    return "\n".join(lines + [f"train: {{seed: *a{levels}}}"]) + "\n"


def test_aliases_that_expand_beyond_the_bound_are_refused_naming_the_key(tmp_path):
    path = tmp_path / "laugh.yaml"
    path.write_text(laughs())
    assert len(path.read_bytes()) < 1000
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert e.value.source == str(path) and "aliases expand" in str(e.value) and f"{MAX_VALUES:,}" in str(e.value)
    assert len(str(e.value)) < 300


def test_aliases_within_the_bound_and_merge_keys_still_load():
    assert load_yaml("a: &x [1, 2]\nb: *x\n", "s") == {"a": [1, 2], "b": [1, 2]}
    assert load_yaml("a: &x {b: 1, c: 2}\nd:\n  <<: *x\n  b: 3\n", "s")["d"] == {"b": 3, "c": 2}


@pytest.mark.parametrize("text, key, lines", [
    ("train:\n  seed: 1\n  epochs: 2\n  seed: 3\n", "train.seed", (2, 4)),
    ("sampler: {batch_size: 8, batch_size: 0}\n", "sampler.batch_size", (1, 1)),
    ("cache: {}\ncache: {ways: 4}\n", "cache", (1, 2)),
])
def test_a_key_given_twice_is_refused_naming_it_and_both_lines(tmp_path, text, key, lines):
    path = tmp_path / "dup.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert e.value.key == key and f"line {lines[0]} and again on line {lines[1]}" in str(e.value)


def test_a_huge_value_is_never_echoed_back(tmp_path):
    path = tmp_path / "huge.yaml"
    path.write_text("train:\n  seed: '" + "x" * 1_000_000 + "'\n")
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert e.value.key == "train.seed" and len(str(e.value)) < 400 and "1,000,000 characters" in str(e.value)
    with pytest.raises(ConfigError) as e:
        load_config(None, ["train.seed=" + "[" * 100_000])
    assert len(str(e.value)) < 600


# ---- array headers ---------------------------------------------------------------------------------
def crafted_npy(shape, dtype="<i8", data: int = 64_000) -> bytes:
    b = io.BytesIO()
    npf.write_array_header_1_0(b, {"descr": dtype, "fortran_order": False, "shape": shape})
    return b.getvalue() + b"\0" * data


def test_a_66_kb_file_stating_terabytes_is_refused_before_any_allocation(tmp_path):
    p = tmp_path / "edges.npy"
    p.write_bytes(crafted_npy((10**12, 2)))
    assert p.stat().st_size < 66_000
    with pytest.raises(DataError, match="header shape") as e:
        npy_header(p)
    assert e.value.path == str(p)


@settings(max_examples=200, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shape=st.lists(st.integers(0, 2**40), min_size=0, max_size=3).map(tuple),
       dtype=st.sampled_from(["<i8", "<f4", "|u1", "<f2", "<u8"]), data=st.integers(0, 4096))
def test_any_npy_header_is_accepted_only_when_the_file_and_the_machine_hold_it(tmp_path, shape, dtype, data):
    p = tmp_path / "a.npy"
    p.write_bytes(crafted_npy(shape, dtype, data))
    stated = int(np.prod(shape, dtype=object)) * np.dtype(dtype).itemsize
    try:
        h = npy_header(p)
    except DataError as e:
        assert e.path == str(p) and "header shape" in str(e)
        extent = int(np.prod([d for d in shape if d], dtype=object)) * np.dtype(dtype).itemsize
        assert stated > data or stated > memory_bytes() or extent > np.iinfo(np.intp).max
    else:
        assert h.shape == shape and h.nbytes == stated <= data
        assert np.load(p, mmap_mode="r").shape == shape


def test_a_trace_whose_header_states_terabytes_is_refused_naming_the_member(tmp_path):
    p = tmp_path / "t.npz"
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("ids.npy", crafted_npy((10**12,)))
        b = io.BytesIO()
        np.save(b, np.array([0, 0], np.int64))
        z.writestr("offsets.npy", b.getvalue())
        b = io.BytesIO()
        np.save(b, np.frombuffer(json.dumps({"num_devices": 1, "num_rows": 4, "num_batches": 1}).encode(), np.uint8))
        z.writestr("header.npy", b.getvalue())
    from lsm_gnn.sim.trace import Trace

    with pytest.raises(DataError, match=r"t\.npz \(ids\.npy\): field header shape"):
        Trace.load(p)
    with pytest.raises(DataError, match="ids.npy"):
        check_npz(p)


def test_one_huge_node_id_is_refused_before_a_table_of_that_size(tmp_path):
    from lsm_gnn.datasets.importer import import_graph

    e = tmp_path / "e.npy"
    np.save(e, np.array([[0, 1], [1, 10**12]], np.int64))
    with pytest.raises(DataError, match="field num_nodes: 1,000,000,000,001 nodes") as err:
        import_graph(tmp_path / "out", e, progress=False)
    assert err.value.path == str(e)
    assert not (tmp_path / "out").exists()


def test_a_node_count_beyond_memory_is_refused_by_the_generator(tmp_path):
    from lsm_gnn.datasets.synthetic import generate

    with pytest.raises(DataError, match="num_nodes"):
        generate(tmp_path / "g", str(10**14), progress=False)


def test_a_huge_value_in_metadata_is_named_but_never_echoed_whole(tmp_path):
    from lsm_gnn.datasets.format import Dataset
    from lsm_gnn.datasets.synthetic import generate

    ds = tmp_path / "ds"
    generate(ds, "300", feature_dim=8, progress=False)
    meta = json.loads((ds / "metadata.json").read_text())
    meta["node_types"]["paper"]["num_nodes"] = "9" * 10_000_000
    (ds / "metadata.json").write_text(json.dumps(meta))
    with pytest.raises(DataError) as e:
        Dataset(ds)
    assert "node_types.paper.num_nodes" in str(e.value) and len(str(e.value)) < 3000
