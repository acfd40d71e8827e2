"""`lsm-gnn bench storage`: measures every reader, prints fio limits and ratios; says when fio is missing."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from click.testing import CliRunner

from conftest import _build_random_dataset
from lsm_gnn.cli import cli
from lsm_gnn.bench.replicate import rotated_order
from lsm_gnn.bench.storage import fault_costs, measure, median_fio, median_point, ratios, round_ratios
from lsm_gnn.storage import open_feature_store
from lsm_gnn.storage.aio import aio_status
from lsm_gnn.utils.seeds import run_seed


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    return _build_random_dataset(tmp_path_factory.mktemp("bench") / "ds", num_nodes=2048, avg_degree=2, dim=1024)


def _run(args):
    res = CliRunner().invoke(cli, ["bench", "storage", *args], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res.output


def test_json_without_fio(ds):
    out = _run([str(ds.root), "--json", "--seconds", "0.05", "--batch-sizes", "64,4096",
                "--seq-batch-sizes", "4096", "--fio", "/nonexistent/fio", "--threads", "4"])
    obj = json.loads(out)
    assert obj["fio"]["random"]["available"] is False and "fio not found" in obj["fio"]["random"]["reason"]
    assert obj["random_iops_vs_fio"] is None and obj["seq_bw_vs_fio"] is None
    got = {(r["reader"], r["pattern"], r["batch_size"]) for r in obj["results"]}
    for reader in ("direct", "buffered", "mmap", "memory"):
        assert {(reader, "random", 64), (reader, "random", 2048), (reader, "sequential", 2048)} <= got
    for r in obj["results"]:
        assert r["rows_per_s"] > 0 and r["batches"] >= 2 and r["path_info"]["reader"] == r["reader"]
        if r["reader"] == "direct":  # random batches at --threads, sequential at fio's sequential depth
            depth = 4 if r["pattern"] == "random" else 16
            assert r["path_info"]["backend"] == ("aio" if aio_status()[0] else "threads")
            assert r["path_info"]["queue_depth"] == depth
            assert r["read_amplification"] == pytest.approx(1.0)
            assert r["in_place_batches"] == (r["batches"] if r["pattern"] == "sequential" else 0)
    text = _run([str(ds.root), "--seconds", "0.02", "--batch-sizes", "64", "--seq-batch-sizes", "",
                 "--readers", "direct", "--fio", "/nonexistent/fio"])
    assert "raw device limit: NOT MEASURED: fio not found" in text


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed (.ci/run installs it)")
def test_with_fio_prints_ratios(ds, tmp_path):
    out_file = tmp_path / "bench.json"
    text = _run([str(ds.root), "--seconds", "0.05", "--batch-sizes", "4096", "--seq-batch-sizes", "4096",
                 "--readers", "direct", "--fio-seconds", "0.5", "--seq-depth", "8", "--repeats", "2",
                 "--output", str(out_file)])
    assert "fio (" in text and "direct random 4K IOPS / fio" in text and "direct sequential bandwidth / fio" in text
    obj = json.loads(out_file.read_text())
    assert obj["fio"]["random"]["iops"] > 0 and obj["fio"]["sequential"]["bw_bytes_per_s"] > 0
    assert obj["random_iops_vs_fio"] > 0 and obj["seq_bw_vs_fio"] > 0
    # two rounds of fio's random and sequential jobs; the ratios: the median of each round's ratio
    for job, key in (("random", "iops"), ("sequential", "bw_bytes_per_s")):
        f = obj["fio"][job]
        assert len(f["per_round"][key]) == 2 and f[key] == pytest.approx(np.median(f["per_round"][key]))
    for key in ("random_iops_vs_fio", "seq_bw_vs_fio"):
        rr = obj["ratio_rounds"][key]
        assert rr["runs"] == 2 and all(v > 0 for v in rr["per_round"]) and obj[key] == rr["median"]
    assert "median of 2 rounds [" in text
    assert obj["measured_once"] == ["fio.qd1", "fio.qd1_jobs2", "fio.mmap_qd1", "capped_mmap", "checksums"]
    assert "per_round" not in obj["fio"]["qd1"]  # the latency jobs run once
    assert "sequential 1 MiB QD8" in text and obj["fio"]["sequential"]["iodepth"] == 8  # the same depth
    seq = [r for r in obj["results"] if r["pattern"] == "sequential"]
    assert seq and all(r["path_info"]["queue_depth"] == 8 for r in seq)
    assert set(obj["meets_targets"]) == {"random_iops_vs_fio", "seq_bw_vs_fio"}
    # the synchronous reads a page fault waits for: alone, beside a second job, through the page cache
    lat = {k: obj["fio"][k] for k in ("qd1", "qd1_jobs2", "mmap_qd1")}
    assert all(v["available"] and v["iodepth"] == 1 and v["lat_s"] > 0 for v in lat.values())
    assert lat["qd1_jobs2"]["numjobs"] == 2 and lat["mmap_qd1"]["engine"] == "mmap"
    assert obj["fault"]["latency_s"] == lat["qd1"]["lat_s"]
    assert obj["fault"]["second_process_wait_s"] == pytest.approx(lat["qd1_jobs2"]["lat_s"] - lat["qd1"]["lat_s"])
    assert "fio 4 KiB QD1 (psync):" in text
    # the mmap loader's own fault: 2 processes at once under the page-cache cap
    # (this 8 MiB file fits in the cap's slack, so the timed gathers may not fault at all:
    # tests/test_storage_faults.py measures faults on a file larger than the cap)
    cm = obj["capped_mmap"]
    assert cm["processes"] == 2 and obj["fault"]["capped_processes"] == 2
    assert obj["fault"]["capped_mmap_s"] == cm["fault_s"] and (cm["fault_s"] is None) == (cm["faults"] == 0)
    assert ("processes at once:" in text) == (cm["faults"] > 0)


def test_rounds_rotated_with_a_new_seed_each(ds):
    out = _run([str(ds.root), "--json", "--seconds", "0.02", "--batch-sizes", "64,4096", "--seq-batch-sizes", "512",
                "--readers", "direct,memory", "--fio", "/nonexistent/fio", "--threads", "4", "--repeats", "3",
                "--seed", "7", "--checksum-repeats", "0", "--fault-processes", "0"])
    obj = json.loads(out)
    units = ["direct random", "direct sequential", "memory", "fio random", "fio sequential"]
    assert obj["repeats"] == 3 and obj["order"] == rotated_order(units, 3)
    assert obj["order"][1] == units[1:] + units[:1]  # round 1 starts at the second unit
    assert obj["seeds"]["by_round"] == [run_seed(7, r) for r in range(3)]
    assert [(r["reader"], r["pattern"], r["batch_size"]) for r in obj["results"]] == [
        ("direct", "random", 64), ("direct", "random", 2048), ("direct", "sequential", 512),
        ("memory", "random", 64), ("memory", "random", 2048), ("memory", "sequential", 512)]
    for r in obj["results"]:  # the headline: each rate's median over the rounds, which are kept
        for key in ("rows_per_s", "block_iops", "storage_gb_per_s"):
            assert len(r["per_round"][key]) == 3 and r[key] == pytest.approx(np.median(r["per_round"][key]))
            sp = r["spread"][key]
            assert (sp["min"], sp["max"], sp["runs"]) == (min(r["per_round"][key]), max(r["per_round"][key]), 3)
        assert r["batches"] >= 2
    # no fio: no ratio in any round
    assert obj["ratio_rounds"]["random_iops_vs_fio"]["per_round"] == [None] * 3
    assert obj["random_iops_vs_fio"] is None and obj["fio"]["random"]["available"] is False


def test_medians_and_paired_ratios_over_rounds():
    def pt(rate):
        return {"reader": "direct", "pattern": "random", "batch_size": 4096, "batches": 2, "rows": 8192,
                "seconds": 0.5, "rows_per_s": rate, "gb_per_s": 1.0, "storage_gb_per_s": rate / 1e3, "iops": rate,
                "block_iops": rate, "read_amplification": 1.0, "path_info": {"reader": "direct"}}

    rates, fio_iops = [80.0, 120.0, 95.0], [100.0, 150.0, 100.0]
    rounds = [[pt(r)] for r in rates]
    m = median_point([rnd[0] for rnd in rounds])
    assert m["rows_per_s"] == 95.0 and m["per_round"]["rows_per_s"] == rates and m["path_info"] == {"reader": "direct"}
    assert m["spread"]["rows_per_s"]["spread"] == pytest.approx(40 / 95) and m["spread"]["rows_per_s"]["flagged"]
    fio = [{"available": True, "iops": f, "bw_bytes_per_s": f * 1e9, "lat_s": 1e-4, "engine": "psync"} for f in fio_iops]
    mf = median_fio(fio)
    assert (mf["iops"], mf["runs"], mf["per_round"]["iops"]) == (100.0, 3, fio_iops)
    assert median_fio([{"available": False, "reason": "no fio"}] * 2) == {"available": False, "reason": "no fio"}
    rr = round_ratios(rounds, fio, fio)["random_iops_vs_fio"]
    # paired: each round against its own fio (0.8, 0.8, 0.95), not the medians' 95 / 100
    assert rr["per_round"] == pytest.approx([0.8, 0.8, 0.95])
    assert rr["median"] == pytest.approx(0.8) and rr["min"] == pytest.approx(0.8) and rr["max"] == pytest.approx(0.95)
    assert rr["spread"] == pytest.approx(0.15 / 0.8) and rr["flagged"]


def test_ratio_arithmetic():
    results = [
        {"reader": "direct", "pattern": "random", "batch_size": 1024, "block_iops": 10.0, "storage_gb_per_s": 1.0},
        {"reader": "direct", "pattern": "random", "batch_size": 4096, "block_iops": 80.0, "storage_gb_per_s": 1.0},
        {"reader": "direct", "pattern": "random", "batch_size": 16384, "block_iops": 90.0, "storage_gb_per_s": 1.0},
        {"reader": "mmap", "pattern": "random", "batch_size": 4096, "block_iops": 1.0, "storage_gb_per_s": 1.0},
        {"reader": "direct", "pattern": "sequential", "batch_size": 4096, "block_iops": 1.0, "storage_gb_per_s": 0.9},
    ]
    r = ratios(results, {"available": True, "iops": 100.0}, {"available": True, "bw_bytes_per_s": 1e9})
    assert r == {"random_iops_vs_fio": pytest.approx(0.8), "seq_bw_vs_fio": pytest.approx(0.9)}
    assert ratios(results, {"available": False}, {"available": False}) == {"random_iops_vs_fio": None,
                                                                          "seq_bw_vs_fio": None}


def test_fault_costs_from_the_qd1_jobs():
    lat = {"qd1": {"available": True, "lat_s": 50e-6}, "qd1_jobs2": {"available": True, "lat_s": 68e-6},
           "mmap_qd1": {"available": True, "lat_s": 55e-6}}
    assert fault_costs(lat) == {"latency_s": 50e-6, "second_process_wait_s": pytest.approx(18e-6),
                                "page_cache_s": pytest.approx(5e-6), "capped_mmap_s": None, "capped_processes": None}
    lat["mmap_qd1"] = {"available": False, "reason": "no mmap engine"}
    assert fault_costs(lat)["page_cache_s"] is None
    capped = fault_costs(lat, {"fault_s": 8e-5, "processes": 2})
    assert (capped["capped_mmap_s"], capped["capped_processes"]) == (8e-5, 2)


def test_measure_counts_rows(ds):
    with open_feature_store(ds, "direct", threads=2) as store:
        r = measure(store, "sequential", 512, 0.0, 0, None)
        assert r["batches"] == 2 and r["rows"] == 1024 and r["io_ops"] == 2 * 2  # 2 MiB per batch, 1 MiB reads
        assert r["bytes_read"] == 1024 * 4096 and np.isclose(r["read_amplification"], 1.0)
        assert r["in_place_batches"] == 2  # consecutive 4 KiB rows into an aligned out: no staging copy


def test_bad_batch_sizes(ds):
    res = CliRunner().invoke(cli, ["bench", "storage", str(ds.root), "--batch-sizes", "a,b"])
    assert res.exit_code != 0 and "comma-separated integers" in res.output
