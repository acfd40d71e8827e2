"""`lsm-gnn dataset ...`: generate, verify, info, list, and download/prepare delegation."""

from __future__ import annotations

import json
import sys
import types

import numpy as np
import pytest
from click.testing import CliRunner

from lsm_gnn.cli import cli
from lsm_gnn.utils.errors import InputError


def run(*args):
    return CliRunner().invoke(cli, ["dataset", *map(str, args)], catch_exceptions=True)


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    out = tmp_path_factory.mktemp("cli") / "ds"
    r = run("generate", 800, "--dim", 8, "--seed", 5, "--out", out, "--no-progress")
    assert r.exit_code == 0, r.output
    assert f"wrote {out}: 800 nodes" in r.output
    return out


def test_generate_verify_info(generated):
    r = run("verify", generated)
    assert r.exit_code == 0 and "OK (full check)" in r.output
    r = run("verify", generated, "--quick", "--json")
    assert r.exit_code == 0 and json.loads(r.output) == {"path": str(generated), "quick": True, "ok": True,
                                                        "problems": []}
    r = run("info", generated)
    assert r.exit_code == 0, r.output
    assert "synthetic-800: 800 nodes" in r.output and "degree paper: min 1" in r.output
    s = json.loads(run("info", generated, "--json").output)
    assert s["num_nodes"] == 800 and s["labels"]["num_classes"] == 19


def test_generate_options(tmp_path):
    out = tmp_path / "h"
    r = run("generate", 500, "--hetero", "--dim", 4, "--dtype", "float16", "--classes", 5,
            "--avg-degree", 6, "--out", out, "--no-progress")
    assert r.exit_code == 0, r.output
    from lsm_gnn.datasets.format import Dataset

    ds = Dataset(out)
    assert ds.name == "synthetic-hetero-500" and ds.num_classes == 5 and ds.features().dtype == np.float16
    assert "author" in ds.node_types
    assert ds.meta["source"]["avg_degree_target"] == 6
    assert 5.5 < ds.num_edges("paper__cites__paper") / 500 < 6.5


def test_generate_refuses_existing_without_force(generated):
    r = run("generate", 800, "--dim", 8, "--out", generated, "--no-progress")
    assert isinstance(r.exception, InputError) and "already exists" in str(r.exception)
    r = run("generate", 800, "--dim", 8, "--seed", 5, "--out", generated, "--force", "--no-progress")
    assert r.exit_code == 0, r.output


def test_generate_bad_size(tmp_path):
    r = run("generate", "enormous", "--out", tmp_path / "x")
    assert isinstance(r.exception, InputError) and "size: expected one of tiny, small, medium" in str(r.exception)
    r = run("generate", "tiny", "--dtype", "int8", "--out", tmp_path / "x")
    assert r.exit_code == 2 and "int8" in r.output


def test_verify_reports_problems_by_file(tmp_path):
    out = tmp_path / "bad"
    assert run("generate", 300, "--dim", 4, "--out", out, "--no-progress").exit_code == 0
    y = np.load(out / "labels/paper.npy")
    y[0] = 99
    np.save(out / "labels/paper.npy", y)
    r = run("verify", out)
    assert r.exit_code == 1
    assert "  labels/paper.npy\n" in r.output and "label out of range: node 0 has 99" in r.output
    j = json.loads(run("verify", out, "--json").output)
    assert not j["ok"] and {p["file"] for p in j["problems"]} == {"labels/paper.npy"}


def test_verify_missing_dir(tmp_path):
    r = run("verify", tmp_path / "none")
    assert r.exit_code == 1 and "does not exist" in r.output


def test_list_and_help():
    r = run("list")
    assert r.exit_code == 0
    for name in ("igb", "igbh", "ogbn-papers100M", "mag240m", "tiny"):
        assert name in r.output
    r = run("--help")
    assert r.exit_code == 0 and "ogbn-papers100M" in r.output and "generate" in r.output


@pytest.fixture
def fake_real(monkeypatch):
    """Stand-in for lsm_gnn.datasets.real that records how it was called."""
    calls = []
    mod = types.ModuleType("lsm_gnn.datasets.real")
    mod.download = lambda name, size, dest, base_url=None, progress=True: calls.append(
        ("download", name, size, dest, base_url, progress)) or dest
    mod.prepare = lambda name, raw_dir, out_dir, size=None, progress=True: calls.append(
        ("prepare", name, raw_dir, out_dir, size, progress))
    import lsm_gnn.datasets as pkg

    monkeypatch.setitem(sys.modules, "lsm_gnn.datasets.real", mod)
    monkeypatch.setattr(pkg, "real", mod, raising=False)
    return calls


def test_download_and_prepare_delegate(fake_real, tmp_path):
    r = run("download", "igb", "--size", "tiny", "--dest", tmp_path / "raw", "--base-url", "http://127.0.0.1:1/",
            "--no-progress")
    assert r.exit_code == 0, r.output
    assert fake_real[-1] == ("download", "igb", "tiny", str(tmp_path / "raw"), "http://127.0.0.1:1/", False)
    r = run("prepare", "mag240m", tmp_path, tmp_path / "out")
    assert r.exit_code == 0, r.output
    assert fake_real[-1] == ("prepare", "mag240m", str(tmp_path), str(tmp_path / "out"), None, True)


def test_download_bad_name_and_size(fake_real):
    r = run("download", "cora")
    assert r.exit_code == 2 and "igb" in r.output
    r = run("download", "igb", "--size", "gigantic")
    assert r.exit_code == 2 and "expected tiny, small, medium, large, full" in r.output
    r = run("download", "mag240m", "--size", "small")
    assert r.exit_code == 2 and "this dataset has one size" in r.output
    assert fake_real == []
