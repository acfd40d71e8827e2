"""machine.json and every run record name the storage device (lsm_gnn.utils.machine.storage_device)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lsm_gnn.utils.machine import hardware, storage_device

KEYS = {"device", "model", "size_bytes", "rotational", "scheduler", "fstype", "mountpoint"}


def test_the_device_holding_a_path_is_described_as_the_kernel_reports_it(tmp_path):
    d = storage_device(tmp_path)
    assert KEYS <= set(d)
    assert d["mountpoint"] and str(tmp_path.resolve()).startswith(d["mountpoint"])
    disk = d.get("disk")
    if disk is None:
        pytest.skip(f"{tmp_path} is on no block device (fstype {d['fstype']})")
    sysblock = Path("/sys/block") / disk
    assert d["size_bytes"] == int((sysblock / "size").read_text()) * 512
    assert d["rotational"] == ((sysblock / "queue" / "rotational").read_text().strip() == "1")
    assert f"[{d['scheduler']}]" in (sysblock / "queue" / "scheduler").read_text() or d["scheduler"] == "none"


def test_a_path_that_does_not_exist_gives_nulls_not_an_error(tmp_path):
    d = storage_device(tmp_path / "nothing" / "here")
    assert KEYS <= set(d)


def test_the_hardware_record_carries_the_working_directorys_storage():
    assert hardware()["storage"]["mountpoint"] == storage_device(os.getcwd())["mountpoint"]
