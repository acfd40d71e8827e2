"""Run records: one JSON document per run, in the schema of schemas/run_record.schema.json.

Every system (lsm-gnn, isolated caches, plain loaders, Dist-DGL, the in-memory ideal) and every
simulator or benchmark run writes one, so the reports compare like with like.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from functools import lru_cache
from importlib import resources
from pathlib import Path

import jsonschema

from lsm_gnn.utils.atomic import write_json
from lsm_gnn.utils.errors import DataError
from lsm_gnn.utils.machine import git_commit, hardware, versions

SCHEMA_VERSION = 1

ROW_KEYS = ("requests", "distinct", "local_hits", "peer_hits", "victim_hits", "storage_rows")
STAGES = ("sample", "exchange_ids", "fetch_cache", "fetch_victim", "fetch_storage",
          "exchange_rows", "train", "other")


@lru_cache(maxsize=1)
def schema() -> dict:
    return json.loads(resources.files("lsm_gnn.schemas").joinpath("run_record.schema.json").read_text())


def new_record(kind: str, system: str, config: dict) -> dict:
    """A record skeleton with provenance filled in; callers fill `metrics` (and `epochs`)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": kind,
        "system": system,
        "status": "complete",
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "config": config,
        "metrics": {},
        "epochs": [],
        "versions": versions(),
        "git_commit": git_commit(),
        "hardware": hardware(),
        "failure": None,
    }


def validate_record(record: dict, source: str = "<record>") -> None:
    try:
        jsonschema.validate(record, schema())
    except jsonschema.ValidationError as e:
        where = "/".join(str(p) for p in e.absolute_path) or "(root)"
        raise DataError(source, f"run record field {where}: {e.message}") from None


def write_record(path: str | os.PathLike, record: dict) -> Path:
    """Validate and write atomically (a reader never sees a half-written record)."""
    validate_record(record, os.fspath(path))
    write_json(path, record)
    return Path(path)


def read_record(path: str | os.PathLike) -> dict:
    try:
        rec = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise DataError(path, f"cannot read run record: {e}") from None
    validate_record(rec, os.fspath(path))
    return rec
