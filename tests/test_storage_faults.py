"""The mmap loader's cost per page fault, measured its way (lsm_gnn.storage.faults)."""

import pytest

from lsm_gnn.storage.faults import capped_fault_seconds


def test_capped_gathers_fault_and_count_every_process(random_dataset):
    ds = random_dataset(num_nodes=16384, avg_degree=2, dim=1024)   # 64 MiB of 4 KiB rows
    # 4 MiB of page cache per process (+ the cap's 16 MiB slack): most of every 2048-row gather faults
    r = capped_fault_seconds(ds.root, processes=2, batch=2048, batches=4, cap_fraction=1 / 16)
    if not r["capped"]:
        pytest.skip("no writable memory cgroup here: the page cache is not capped")
    assert r["processes"] == 2 and len(r["per_process"]) == 2 and r["cap_bytes_per_process"] == 4 << 20
    # measured at the cap, as the mmap system runs: the warm-up fills it (1 batch of 8 MiB) + 2
    assert r["warmup"] == 3
    assert r["faults"] == sum(p["faults"] for p in r["per_process"])
    # 4 gathers of about 1,920 distinct rows per process; the two processes' capped page caches
    # (20 MiB each with the slack, pages of one file shared) hold well under the 64 MiB: a good
    # share of every gather faults (40 % when measured), never more than the rows gathered
    assert 2 * 4 * 400 < r["faults"] <= 2 * 4 * 2048
    assert r["fault_s"] == pytest.approx(sum(p["seconds"] for p in r["per_process"]) / r["faults"])
    assert 1e-7 < r["fault_s"] < 0.1
