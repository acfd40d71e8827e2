"""Helpers shared by the workflow's report scripts (Snakemake puts this folder on sys.path).

The regime every figure sits in is one number, `cache_rows_per_iteration_rows`: the rows a
device's cache lines hold over the distinct rows one iteration requests of that device (per device,
after the per-batch coalescing). On IGB-full with a GPU cache of several million rows it is in the
tens (docs/workflow.md has the arithmetic); below about 1 a cache cannot even hold one iteration's
rows and every policy looks alike.
"""

from __future__ import annotations

import sys
from pathlib import Path

RATIO_KEY = "cache_rows_per_iteration_rows"
PAPER_REGIME = "IGB-full with a 4-10 GiB GPU cache: about 7-26"


def log_to(sm) -> None:
    """Send the script's stdout and stderr to the rule's log file (every rule has one)."""
    if getattr(sm, "log", None) and len(sm.log):
        Path(sm.log[0]).parent.mkdir(parents=True, exist_ok=True)
        f = open(sm.log[0], "w", buffering=1)
        sys.stdout = sys.stderr = f


def fmt(v, spec: str = ".2f", none: str = "-") -> str:
    if v is None or (isinstance(v, float) and v != v):
        return none
    return format(v, spec)


def reading(v) -> str:
    """A table cell rounded for reading: thousands grouped, no decimals from 1,000 up, one from 100,
    two from 10, three below (6149902336.000 -> 6,149,902,336; 416.8645 -> 416.9; 0.63217 -> 0.632);
    integers grouped; NaN and None empty."""
    import numbers

    if v is None or (isinstance(v, float) and v != v):
        return ""
    if isinstance(v, bool) or not isinstance(v, numbers.Number):
        return str(v)
    if isinstance(v, numbers.Integral):
        return f"{int(v):,}"
    v = float(v)
    if v == 0:
        return "0"
    a = abs(v)
    return f"{v:,.0f}" if a >= 1000 else f"{v:.1f}" if a >= 100 else f"{v:.2f}" if a >= 10 else f"{v:.3f}"


def md_table(df) -> str:
    cols = [str(c) for c in df.columns]
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    out += ["| " + " | ".join(reading(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(out)


def dataset_words(ds: dict) -> str:
    """How the report names the dataset: 'the synthetic graph `synthetic-small`' etc."""
    if ds["kind"] == "synthetic":
        return f"the synthetic {'IGBH' if ds['hetero'] else 'IGB'}-like graph `{ds['tag']}`"
    if ds["kind"] == "real":
        return f"the real dataset `{ds['name']}`"
    return f"the prepared dataset `{ds['name']}` ({ds['data']})"


def row_bytes(data: str) -> int:
    from lsm_gnn.datasets.format import Dataset

    return int(Dataset(data).features().row_bytes)


def record_regime(rec: dict, row_bytes: int) -> dict:
    """Cache rows per device, distinct rows per iteration per device and their ratio, from a run
    record: `metrics.memory.cache_bytes / row_bytes` over `metrics.rows.distinct / (iterations x
    devices)` (rows count the measured iterations of every epoch, summed over the devices). None
    where the system has no cache lines or the record no counts."""
    m = rec.get("metrics") or {}
    mem = m.get("memory") or {}
    cfg = rec.get("config") or {}
    out = {"cache_rows": None, "distinct_rows_per_iteration": None, "ratio": None}
    cache_bytes = mem.get("cache_bytes")
    if rec.get("system") in ("memory", "mmap", "direct", "distdgl") or not (cfg.get("cache") or {}).get("enabled", True):
        cache_bytes = None
    if cache_bytes and row_bytes:
        out["cache_rows"] = int(cache_bytes) // int(row_bytes)
    distinct = (m.get("rows") or {}).get("distinct")
    warm = int((cfg.get("train") or {}).get("warmup_iters") or 0)
    iters = sum(max(int(ep.get("iterations", 0)) - warm, 0) for ep in rec.get("epochs") or [])
    devices = int(mem.get("devices") or (cfg.get("distributed") or {}).get("devices") or 1)
    if distinct and iters:
        out["distinct_rows_per_iteration"] = distinct / (iters * devices)
    if out["cache_rows"] and out["distinct_rows_per_iteration"]:
        out["ratio"] = out["cache_rows"] / out["distinct_rows_per_iteration"]
    return out


def sim_regime(row) -> float | None:
    """The same ratio for one `lsm-gnn simulate` result row: cache lines per cache over the
    distinct requests each cache serves per iteration (caches = devices in both modes)."""
    distinct = float(row["distinct"])
    if not distinct:
        return None
    return float(row["capacity_rows"]) * int(row["devices"]) * int(row["batches"]) / distinct


def scaling_points(frames) -> "pd.DataFrame":
    """The scaling figure's points from the shared- and isolated-cache replays over G devices (one
    `lsm-gnn simulate` CSV each): per (devices, mode, policy), storage rows per device per
    iteration, Belady MIN's per device per iteration at the same memory (MIN summed over the
    caches that serve the trace, as the simulator reports it), the hit rate and the regime."""
    import pandas as pd

    df = pd.concat(list(frames), ignore_index=True)
    per = df["devices"] * df["batches"]
    out = pd.DataFrame({
        "devices": df["devices"].astype(int), "mode": df["mode"], "policy": df["policy"],
        "storage_rows_per_device_iteration": df["storage_rows"] / per,
        "min_rows_per_device_iteration": df["min_rows"] / per,
        "hit_rate": df["hit_rate"],
        RATIO_KEY: [sim_regime(r) for _, r in df.iterrows()],
    })
    return out.sort_values(["policy", "mode", "devices"], kind="stable").reset_index(drop=True)
