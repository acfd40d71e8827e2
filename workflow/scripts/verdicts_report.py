"""The report's opening section: one row per claim (a)-(d) with what was measured (the command and
the figure), the regime it was measured in, the verdict and the rule that gave it
(workflow/scripts/verdicts.py). Claims (b)-(d) come from figures.json (hardware-independent);
claim (a) from the emulated-accelerator matrix (baselines summary.csv, ratios.json), the testbed
(results/<ds>/testbed/summary.json, when it ran) and the projection onto the paper's setting
(paper-range.json, with its validation); claim (e) from the exchange's share of the 2-device epoch
(ratios.json) and the multi-device replay (bench.json).

Also writes timings.json (the report's timed figures with their runs and spread, for `lsm-gnn
report compare`) and machine.json (the machine the report ran on)."""

import json
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from lsm_gnn.utils.atomic import write_json, write_text
from lsm_gnn.utils.machine import git_commit, hardware, versions

import verdicts as V
from wfcommon import RATIO_KEY, log_to

TIMINGS_SCHEMA = "lsm-gnn-report-timings"


def emulated_rows(summary: pd.DataFrame) -> pd.DataFrame:
    emu = summary[summary.accelerator != "real"]
    return emu if not emu.empty else summary


def measured_a(summary: pd.DataFrame, ratios: dict) -> dict:
    """Dist-DGL / LSM-GNN from the medians of the emulated runs, with both systems' spread."""
    emu = emulated_rows(summary)
    lsm = emu[(emu.system == "lsm") & (emu.devices == 2)]
    dd = emu[emu.system == "distdgl"]
    spread = lambda t: float(t.steady_spread.iloc[0]) if not t.empty and pd.notna(t.steady_spread.iloc[0]) else None  # noqa: E731
    return {"ratio": ratios.get("distdgl_vs_lsm_epoch"), "accelerator": ratios.get("accelerator"),
            "au_lsm": ratios.get("lsm_au"), "spread_lsm": spread(lsm), "spread_distdgl": spread(dd),
            "runs": int(min(lsm.runs.min(), dd.runs.min())) if not lsm.empty and not dd.empty else 0}


def projected_a(prange: dict, run_batch: int, paper_batch: int) -> dict:
    out = {"run_batch": run_batch, "paper_batch": paper_batch}
    for b, r in (prange.get("batches") or {}).items():
        if "base" in r:
            out[b] = {"base": r["base"], "min": r["min"], "max": r["max"]}
    return out


def timings(summary: pd.DataFrame, ratios: dict, prange: dict, measured: dict) -> dict:
    systems = {}
    for r in summary.itertuples():
        systems[f"{r.label} [{r.accelerator}]"] = {
            "epoch_steady_s": r.epoch_steady_s, "steady_min": r.steady_min, "steady_max": r.steady_max,
            "steady_spread": r.steady_spread, "runs": int(r.runs), "au": None if pd.isna(r.au) else r.au,
            "samples_per_s": None if pd.isna(r.samples_per_s) else r.samples_per_s}
    proj = {f"batch {b}": {"base": r.get("base"), "min": r.get("min"), "max": r.get("max")}
            for b, r in (prange.get("batches") or {}).items() if "base" in r}
    return {"schema": TIMINGS_SCHEMA, "version": 1, "spread_limit": V.SPREAD_LIMIT,
            "ratios": {k: v for k, v in ratios.items() if k.endswith("_vs_lsm_epoch")},
            "claim_a_measured": measured, "systems": systems, "projection_paper_distdgl_vs_lsm": proj}


def machine() -> dict:
    return {"hardware": hardware(), "versions": versions(), "git_commit": git_commit(),
            "written": datetime.now(timezone.utc).isoformat(timespec="seconds")}


NA = "-"


def cell(v: dict) -> str:
    if v["why"] == V.TESTBED_OFF:
        return V.TESTBED_OFF
    return f"{V.sentence(v)}: {v['figure']}"


def comm_inputs(ratios: dict, bench: dict | None) -> dict:
    """(e)'s data: the exchange stages' share of LSM-GNN's 2-device epoch over the timed runs
    (baselines ratios.json) and the bytes exchanged per iteration (the bench replay's exact count;
    its one-run times are not used)."""
    share = ratios.get("lsm_exchange_share") or {}
    s = ((bench or {}).get("systems") or {}).get("shared") or {}
    return {**share, "accelerator": ratios.get("accelerator"),
            "exchange_bytes_per_iteration": s.get("exchange_bytes_per_iteration")}


def table(figs: dict, va: dict, ve: dict, measured: dict, params, ratios: dict) -> tuple[str, str]:
    f = figs["figures"]
    reg = f["regime"]
    batch, frac, pb = reg["batch_size"], reg["cache_fraction"], int(params.paper_batch)
    vb, vc, vd = (figs["verdicts"][k] for k in ("b", "c", "d"))
    si = f["shared_vs_isolated"]
    si_regime = next(iter(si[RATIO_KEY].values()), None)
    dh = figs.get("claim_inputs", {}).get("d_headline") or {}
    acc = measured.get("accelerator") or "real compute"
    au = measured.get("au_lsm")
    lsm_regime = ratios.get("cache_rows_per_iteration_rows")
    mem = f"{100 * frac:g} % memory per device"
    cols = va["columns"]
    da = vd.get("authors") or {"verdict": V.NOT_MEASURED, "why": "not simulated in this run", "figure": "n/a"}
    # (claim, simulated, measured here, emulated, projected, regime, rule, command)
    rows = [
        ("(a) one node with 2 GPUs beats Dist-DGL on 2 x 2 GPUs, up to 3.75x on epoch time",
         "(a time: no count decides it)", cell(cols[V.MEASURED]), cell(cols[V.EMULATED]), cell(cols[V.PROJECTED]),
         f"measured: batch {batch}, {mem}, LSM-GNN's cache rows / distinct rows per iteration "
         f"{'n/a' if lsm_regime is None else f'{lsm_regime:.1f}'}, AU {'n/a' if au is None else f'{100 * au:.0f} %'}; "
         f"emulated and projected: the paper's setting (profile paper), batch {pb}", va["rule"],
         f"`lsm-gnn run --system lsm` / `--system distdgl` with emulated `{acc}` accelerators (Baselines); the testbed "
         f"(`make reproduce-testbed`); `lsm-gnn project RECORDS --hardware paper` at batch {batch} and {pb} (Projection)"),
        ("(b) the shared cache lowers storage accesses against isolated per-GPU caches",
         f"{V.sentence(vb)}: shared / isolated storage rows {vb['figure']}", NA, NA, NA,
         f"2 devices, batch {batch}, {mem}, W = 8, cache rows / distinct rows per iteration "
         f"{'n/a' if si_regime is None else f'{si_regime:.1f}'}", vb["rule"],
         "`lsm-gnn simulate D --trace trace-g2.npz --mode shared` / `--mode isolated` (Cache policies)"),
        ("(c) the hybrid policy beats static-only and dynamic-only eviction (without the victim buffer)",
         f"{V.sentence(vc)}: {vc['figure']}", NA, NA, NA,
         f"1 device, {mem}, no victim buffer (every row a cache line), every batch and W of the PVP study; "
         "each point's cache rows / distinct rows per iteration in brackets in the verdict", vc["rule"],
         "`lsm-gnn simulate D --trace T --policy hybrid --policy static --policy dynamic --no-victim --window W` "
         "(PVP study); with the buffer: `--policy all` and the regime sweep (Cache policies)"),
        ("(d) the victim buffer + PVP lowers storage pressure, at equal memory",
         f"{V.sentence(vd)}: {vd['figure']}", NA, NA, NA,
         f"1 device, batch {batch}, {mem} in all (cache + queues + landing buffer), W = 8, host share "
         f"{dh.get('host_share', 'n/a')}: queue depth / spill attempts per iteration "
         f"{'n/a' if dh.get('depth_per_spill') is None else format(dh['depth_per_spill'], '.3g')}", vd["rule"],
         "`lsm-gnn simulate D --trace T --policy hybrid --victim --host-fraction H` against `--no-victim` (PVP study)"),
        ("(d) the victim buffer + PVP lowers storage pressure, at the authors' configuration",
         f"{V.sentence(da)}: {da['figure']}", NA, NA, NA,
         f"1 device, W = 8, the cache at {mem} as without the buffer, plus queues of the authors' depth in extra "
         "pinned host memory (not equal memory)", vd["rule"],
         "`lsm-gnn simulate D --trace T --policy hybrid --victim --victim-depth 32768` with the queues beside the "
         "budget (PVP study)"),
        ("(e) the communication layer's overheads are low",
         NA, cell(ve), NA, NA,
         f"2 devices, batch {batch}, {mem}, emulated `{acc}` accelerators, exchange over gloo on 127.0.0.1",
         ve["rule"], "`lsm-gnn run --system lsm --devices 2` (Baselines), `lsm-gnn bench multidevice` (Multi-device)"),
    ]
    out = ["| claim | simulated (exact counts) | measured on this machine | emulated (testbed) | projected | regime |",
           "|---|---|---|---|---|---|"]
    out += [f"| {c} | {s_} | {m} | {e} | {p} | {r} |" for c, s_, m, e, p, r, _, _ in rows]
    seen, rules = set(), []
    for c, *_, rule, cmd in rows:
        key = c.split(")")[0] + ")"
        if key not in seen:
            seen.add(key)
            rules.append(f"- {key}: {rule}")
        rules.append(f"  - command{' (' + c.rsplit(', ', 1)[-1] + ')' if key == '(d)' else ''}: {cmd}")
    return "\n".join(out), "\n".join(rules)


def main(sm):
    figs = json.loads(Path(sm.input.figures).read_text())
    summary = pd.read_csv(sm.input.summary)
    ratios = json.loads(Path(sm.input.ratios).read_text())
    prange = json.loads(Path(sm.input.paper_range).read_text())
    # the testbed's summary (another rule, results/<ds>/testbed/summary.json) when it is on
    tb_path = getattr(sm.input, "testbed", None)
    testbed = json.loads(Path(str(tb_path)).read_text()) if tb_path and Path(str(tb_path)).exists() else None
    mb_path = getattr(sm.input, "multidevice", None)
    bench = json.loads(Path(str(mb_path)).read_text()) if mb_path and Path(str(mb_path)).exists() else None
    measured = measured_a(summary, ratios)
    va = V.claim_a(measured, projected_a(prange, int(sm.params.batch), int(sm.params.paper_batch)), testbed,
                   prange.get("validation"))
    ve = V.claim_e(comm_inputs(ratios, bench))
    write_json(sm.output.timings, {**timings(summary, ratios, prange, measured), "verdict_a": va, "verdict_e": ve})
    write_json(sm.output.machine, machine())
    tab, rules = table(figs, va, ve, measured, sm.params, ratios)
    text = f"""## Verdicts: the paper's claims on this run

Each claim of LSM-GNN (Park et al., arXiv 2407.15264) judged on this run's data by the rule stated
under the table (workflow/scripts/verdicts.py), one column per kind of evidence: **simulated**
(exact counts of the trace simulator: the same seed and settings give the same verdict on any
machine, `figures.json`; `lsm-gnn report compare` puts two reports side by side), **measured on
this machine** (timed runs with emulated accelerators on this machine's disk: medians of repeated,
interleaved runs; a figure whose runs spread 5 % or more gives no verdict), **emulated** (the
testbed: the paper's storage profile and accelerators, time-dilated; counted only when its
validations are met) and **projected** (`lsm-gnn project` onto the paper's setting; counted only
when its validation on this machine is within its tolerance). "-": that kind of evidence does not
bear on the claim. No verdict rests on a failed validation.

{tab}

Rules and commands:
{rules}
"""
    write_text(sm.output.fragment, text)


if __name__ == "__main__" and "snakemake" in globals():
    log_to(snakemake)  # noqa: F821
    main(snakemake)  # noqa: F821
