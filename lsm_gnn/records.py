"""Run records: one JSON document per run, in the schema of schemas/run_record.schema.json.

Every system (lsm-gnn, isolated caches, plain loaders, Dist-DGL, the in-memory ideal) and every
simulator or benchmark run writes one, so the reports compare like with like.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import tempfile
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Iterator

import jsonschema

from lsm_gnn.utils.atomic import WRITE_ERRNOS, make_parent, remove_leftovers, write_json
from lsm_gnn.utils.errors import DataError, OutputError, is_environment_error
from lsm_gnn.utils.locks import exclusive
from lsm_gnn.utils.machine import git_commit, hardware, versions

SCHEMA_VERSION = 1

ROW_KEYS = ("requests", "distinct", "local_hits", "peer_hits", "victim_hits", "storage_rows")
STAGES = ("sample", "exchange_ids", "fetch_cache", "fetch_victim", "fetch_storage",
          "exchange_rows", "train", "other")


WINDOW_KEYS = ("iterations", "seeds", "input_rows", "edges", "busy_s", "wall_s")


def batch_window(shapes: list, walls: list) -> dict:
    """One timed window of a worker: seeds, input rows, edges and accelerator busy seconds summed
    over its batches (`shapes`: one (seeds, input rows, edges, busy s) per batch), its wall time."""
    seeds, rows, edges, busy = (sum(x) for x in zip(*shapes)) if shapes else (0, 0, 0, 0.0)
    return {"iterations": len(shapes), "seeds": int(seeds), "input_rows": int(rows), "edges": int(edges),
            "busy_s": float(busy), "wall_s": float(sum(walls))}


def accelerator_block(emulated: dict | None, device: str, windows: list[dict], overshoot_s: float | None = None) -> dict:
    """metrics.accelerator of one worker: real or emulated (`emulated`: the accelerator's own record:
    profile, constants), AU over its timed windows (busy time / wall time, MLPerf Storage's
    definition; null for real compute) and the mean batch shape."""
    from lsm_gnn.accelerator import utilisation

    tot = {k: sum(w[k] for w in windows) for k in WINDOW_KEYS}
    n = max(1, tot["iterations"])
    out = {"mode": "real", "device": device} if emulated is None else dict(emulated)
    out.update({"busy_s": tot["busy_s"] if emulated is not None else None, "wall_s": tot["wall_s"],
                "au": utilisation(tot["busy_s"], tot["wall_s"]) if emulated is not None else None,
                "iterations": tot["iterations"], "seeds": tot["seeds"],
                "seeds_per_iteration": tot["seeds"] / n, "input_rows_per_iteration": tot["input_rows"] / n,
                "edges_per_iteration": tot["edges"] / n})
    if emulated is not None and overshoot_s is not None:
        out["overshoot_s"] = overshoot_s
    return out


def merge_accelerators(blocks: list[dict]) -> dict:
    """metrics.accelerator over workers: AU = all busy time / all wall time (the accelerators' share
    of the run), each worker's AU and the lowest, batch shape per worker and iteration."""
    from lsm_gnn.accelerator import utilisation

    out = dict(blocks[0])
    if out.get("mode") == "emulated":
        busy, wall = sum(b["busy_s"] for b in blocks), sum(b["wall_s"] for b in blocks)
        out.update({"busy_s": busy, "wall_s": wall, "au": utilisation(busy, wall),
                    "au_per_worker": [b["au"] for b in blocks], "au_min": min(b["au"] for b in blocks)})
    else:
        out["wall_s"] = sum(b["wall_s"] for b in blocks)
    n = max(1, sum(b["iterations"] for b in blocks))
    out["iterations"] = sum(b["iterations"] for b in blocks)
    out["seeds"] = sum(b["seeds"] for b in blocks)
    for k in ("seeds_per_iteration", "input_rows_per_iteration", "edges_per_iteration"):
        out[k] = sum(b[k] * b["iterations"] for b in blocks) / n
    out["workers"] = len(blocks)
    return out


def throughput(acc: dict, per_worker: list[dict] | None = None) -> dict:
    """Samples (seed nodes) and iterations per second over the timed windows: one worker's, or the
    sum over workers that run side by side."""
    if per_worker:
        parts = [throughput(b) for b in per_worker]
        return {k: sum(p[k] for p in parts) if all(p[k] is not None for p in parts) else None
                for k in ("samples_per_s", "iterations_per_s")}
    wall = acc.get("wall_s") or 0.0
    return {"samples_per_s": acc["seeds"] / wall if wall > 0 else None,
            "iterations_per_s": acc["iterations"] / wall if wall > 0 else None}


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


@contextlib.contextmanager
def claim_record(path: str | os.PathLike | None) -> Iterator[Path | None]:
    """Before a run starts: make sure its record can be written at `path`, and hold the record's
    writer lock until the block ends (a second run on the same path is refused with a BusyError,
    not left to overwrite the first one's record). Checked: `path` is not a folder, its folder
    exists or can be made, and a file can be created and removed in it (a read-only or full file
    system fails here, before the run, with an OutputError naming the path). Leftovers of a killed
    writer of the record are removed. `None`: no record, nothing to claim."""
    if path is None:
        yield None
        return
    path = Path(path)
    if path.is_dir():
        raise OutputError(path, "the run record's path is a folder; give a file name (e.g. run.json)")
    folder = make_parent(path)
    with exclusive(path, "run record"):
        try:
            with tempfile.NamedTemporaryFile(prefix=f".{path.name}.", suffix=".probe.partial", dir=folder) as f:
                f.write(b"{}\n")
                f.flush()
                os.fsync(f.fileno())
        except OSError as e:
            if is_environment_error(e) or e.errno in WRITE_ERRNOS:
                raise OutputError.from_os_error(path, e, "the run record cannot be written here") from None
            raise
        remove_leftovers(path)
        yield path


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
