"""Replicated runs, one rule for every benchmark and report: MLPerf Storage's replication limit
(results within 5 %), each figure's median, min, max and spread over its runs, the rotated order of
the rounds and each round's seed, one run's summary, the runs a figure is taken from, and each
system's ratio to LSM-GNN within a round. `lsm-gnn bench compare`, `bench storage`, `bench validate`
and the workflow's report scripts read them from here."""

from __future__ import annotations

import statistics

from lsm_gnn.metrics import bound_stage, timed_iterations, timed_window
from lsm_gnn.testbed import stage_view


SPREAD_LIMIT = 0.05
"""MLPerf Storage: replicated results must agree within 5 %."""


def spread_of(values: list[float]) -> dict:
    """Median, min, max, (max - min) / median and whether that exceeds SPREAD_LIMIT."""
    vals = [float(v) for v in values if v is not None]
    if not vals:
        return {"median": None, "min": None, "max": None, "spread": None, "flagged": None, "runs": 0}
    med = statistics.median(vals)
    sp = (max(vals) - min(vals)) / med if med else None
    return {"median": med, "min": min(vals), "max": max(vals), "spread": sp,
            "flagged": bool(sp is not None and sp > SPREAD_LIMIT), "runs": len(vals)}


def with_seed(cfg, seed: int):
    """`cfg` with train.seed = `seed` (the sampler's shuffle and the model's initialisation)."""
    return cfg.model_copy(update={"train": cfg.train.model_copy(update={"seed": int(seed)})})


def rotated_order(systems: list[str], repeats: int) -> list[list[str]]:
    """Round r runs the systems starting at r mod S: every system takes every place in turn."""
    S = len(systems)
    return [[systems[(r + i) % S] for i in range(S)] for r in range(repeats)]


def summarise_run(rec: dict) -> dict:
    """One run's figures: steady epoch, AU, samples/s, stages, storage rows and reads per iteration
    (all devices together), the accelerator's busy time per step."""
    m = rec["metrics"]
    t = m.get("time") or {}
    acc = m.get("accelerator") or {}
    its = timed_iterations(rec)
    rows, traffic = m.get("rows") or {}, m.get("traffic") or {}
    emu = m.get("emulation") or {}
    S = float(emu.get("time_scale") or 1.0)  # every time below divided back by the run's time scale

    def div(v):
        return None if v is None else v / S

    return {"epoch_steady_s": div(t.get("epoch_steady_s")), "epoch_cold_s": div(t.get("epoch_cold_s")),
            "first_epoch_s": div(t.get("first_epoch_s")), "preprocessing_s": t.get("preprocessing_s"),
            "au": acc.get("au"), "au_min": acc.get("au_min", acc.get("au")),
            "samples_per_s": None if (m.get("throughput") or {}).get("samples_per_s") is None
            else m["throughput"]["samples_per_s"] * S,
            "per_iteration": None if t.get("per_iteration") is None
            else {k: div(v) for k, v in t["per_iteration"].items()},
            "per_iteration_wall": div(t.get("per_iteration_wall")),
            "stages": stage_view(rec.get("system"), None if t.get("per_iteration") is None
                                 else {k: div(v) for k, v in t["per_iteration"].items()}, m.get("testbed"),
                                 (((m.get("storage") or {}).get("emulation")) or {}).get("lateness_fraction")),
            "testbed": {k: v for k, v in (m.get("testbed") or {}).items() if k not in ("table",)} or None,
            "bound": bound_stage(rec),
            "busy_s_per_iteration": (acc.get("busy_s") or 0.0) / max(1, int(acc.get("iterations") or 0)) / S,
            "time_scale": S, "cpu_share": emu.get("cpu_share"), "valid": emu.get("valid", True),
            "invalid_causes": emu.get("invalid_causes") or [],
            "storage_emulation": {k: v for k, v in (((m.get("storage") or {}).get("emulation")) or {}).items()
                                  if k != "raw"} or None,
            "storage_bytes_per_iteration": (traffic.get("storage_bytes") or 0) / its,
            "storage_rows_per_iteration": rows.get("storage_rows", 0) / its,
            "storage_io_ops_per_iteration": traffic.get("storage_io_ops", 0) / its,
            "exchange_bytes_per_iteration": (m.get("multidevice") or {}).get("exchange_bytes_per_iteration"),
            "storage_bytes": traffic.get("storage_bytes"), "network_bytes": traffic.get("network_bytes"),
            "iterations_per_epoch": (timed_window(t).get("iterations_per_epoch")),
            "memory": m.get("memory"), "accelerator": {k: acc.get(k) for k in ("mode", "profile", "scale", "step")}}


def valid_runs(runs: list[dict]) -> list[dict]:
    """The runs a figure is taken from: those whose emulation held (a run whose pacing fell behind
    measured the machine's other work or a scale too small, not the model: MLPerf Storage counts only
    runs that pass its checks). None when no run held: the figure is then absent (None), never taken
    from invalid runs; the invalid runs stay in `runs` with their causes."""
    return [r for r in runs if r.get("valid") is not False]


def summarise_system(runs: list[dict]) -> dict:
    """A system's runs: each figure's median, min, max and spread over its valid runs (valid_runs);
    the median run's stages; every run kept under `runs`, the invalid ones named."""
    all_runs, runs = runs, valid_runs(runs)
    steady = [r["epoch_steady_s"] for r in runs]
    med = spread_of(steady)
    mid = min(runs, key=lambda r: abs((r["epoch_steady_s"] or 0) - (med["median"] or 0))) if runs else {}
    out = {"epoch_steady_s": med, "au": spread_of([r["au"] for r in runs]),
           "samples_per_s": spread_of([r["samples_per_s"] for r in runs]),
           "first_epoch_s": spread_of([r["first_epoch_s"] for r in runs]),
           "runs": all_runs, "valid_runs": sum(1 for r in all_runs if r.get("valid") is not False)}
    for k in ("per_iteration", "per_iteration_wall", "stages", "bound", "storage_rows_per_iteration",
              "storage_io_ops_per_iteration", "storage_bytes_per_iteration", "exchange_bytes_per_iteration",
              "busy_s_per_iteration", "iterations_per_epoch", "memory", "accelerator", "preprocessing_s"):
        out[k] = mid.get(k)
    out["spread"] = med["spread"]  # the steady epoch's (max - min) / median over the runs
    out["cpu_share"] = spread_of([r.get("cpu_share") for r in runs])
    out["lateness_fraction"] = spread_of([(r.get("storage_emulation") or {}).get("lateness_fraction")
                                          for r in all_runs])
    out["invalid_runs"] = [{"run": r.get("round"), "causes": r.get("invalid_causes")} for r in all_runs
                           if r.get("valid") is False]
    return out


def correlation(xs: list, ys: list) -> float | None:
    """Pearson's r of the pairs where both are known (None under 3 pairs or no variation)."""
    pairs = [(float(x), float(y)) for x, y in zip(xs, ys) if x is not None and y is not None]
    if len(pairs) < 3:
        return None
    try:
        return statistics.correlation([p[0] for p in pairs], [p[1] for p in pairs])
    except statistics.StatisticsError:
        return None


def per_round_ratios(runs: dict[str, list[dict]]) -> dict:
    """Each system's steady epoch over LSM-GNN's in the same round (the runs' `round`; a round's
    runs follow one another within minutes, so the VM's drift between rounds cancels), from rounds
    where both runs are valid: spread_of per system, with the ratios in round order."""
    lsm = {r["round"]: r["epoch_steady_s"] for r in valid_runs(runs.get("lsm", []))}
    out = {}
    for s, v in runs.items():  # valid runs only, on both sides of a round
        vals = [r["epoch_steady_s"] / lsm[r["round"]] for r in valid_runs(v)
                if s != "lsm" and r["epoch_steady_s"] and lsm.get(r["round"])]
        if vals:
            out[s] = {**spread_of(vals), "values": vals}
    return out
