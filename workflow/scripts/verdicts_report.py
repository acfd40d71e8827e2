"""The report's opening section: one row per claim (a)-(d) with what was measured (the command and
the figure), the regime it was measured in, the verdict and the rule that gave it
(workflow/scripts/verdicts.py). Claims (b)-(d) come from figures.json (hardware-independent);
claim (a) from the emulated-accelerator matrix (baselines summary.csv, ratios.json), the testbed
(results/<ds>/testbed/summary.json, when it ran) and the projection onto the paper's setting
(paper-range.json, with its validation); claim (e) from the exchange's share of the 2-device epoch
(ratios.json) and the multi-device replay (bench.json).

The section opens with one screen (issue 45): a sentence per claim and the claims figure (the
paper's value beside each kind of evidence, with its range, a hollow mark where a validation
failed); the table with every cell, the rules and the commands follow under it. The same findings
go to timings.json's `findings` (the README's findings table, `lsm-gnn report quote`).

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

DECIDED = (V.HOLDS, V.PARTLY, V.NOT_HERE)
# each claim as the report states it, the paper's value or wording, the figure it is read by here
# (verdicts.py's rules) with the value where the reading changes (`paper_value`: the paper's own
# number; otherwise the reading's, where the paper gives none), and the report section with the data
CLAIMS = {
    "a": dict(statement=f"one node with 2 GPUs beats Dist-DGL on 2 x 2 GPUs, up to {V.PAPER_SPEEDUP:g}x on epoch time",
              paper=f"up to {V.PAPER_SPEEDUP:g}x", measure="Dist-DGL epoch / LSM-GNN epoch (x)",
              threshold=V.PAPER_SPEEDUP, paper_value=True, holds="above", log=True, section="Baselines"),
    "b": dict(statement="the shared cache lowers storage accesses against isolated per-GPU caches",
              paper="fewer storage accesses", measure="shared / isolated storage rows (ratio)", threshold=1.0,
              holds="below", log=False, section="Cache policies"),
    "c": dict(statement="the hybrid policy beats static-only and dynamic-only eviction (without the victim buffer)",
              paper="hybrid beats both", measure="hybrid / the better of static and dynamic, storage rows (ratio)",
              threshold=1.0, holds="below", log=False, section="The victim buffer's regime"),
    "d": dict(statement="the victim buffer + PVP lowers storage pressure, at equal memory",
              paper="lower storage pressure", measure="storage rows with / without the buffer (ratio)",
              threshold=1.0, holds="below", log=False, section="The victim buffer's regime"),
    "d_authors": dict(statement="the victim buffer + PVP lowers storage pressure, at the authors' configuration",
                      paper="lower storage pressure", measure="storage rows with / without the buffer (ratio)",
                      threshold=1.0, holds="below", log=False, section="The victim buffer's regime"),
    "e": dict(statement="the communication layer's overheads are low", paper="low (no number)",
              measure="exchange stages' share of the epoch (%)", threshold=V.COMM_LIMIT, holds="below",
              log=False, section="Multi-device"),
}

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
        (f"(a) {CLAIMS['a']['statement']}",
         "(a time: no count decides it)", cell(cols[V.MEASURED]), cell(cols[V.EMULATED]), cell(cols[V.PROJECTED]),
         f"measured: batch {batch}, {mem}, LSM-GNN's cache rows / distinct rows per iteration "
         f"{'n/a' if lsm_regime is None else f'{lsm_regime:.1f}'}, AU {'n/a' if au is None else f'{100 * au:.0f} %'}; "
         f"emulated and projected: the paper's setting (profile paper), batch {pb}", va["rule"],
         f"`lsm-gnn run --system lsm` / `--system distdgl` with emulated `{acc}` accelerators (Baselines); the testbed "
         f"(`make reproduce-testbed`); `lsm-gnn project RECORDS --hardware paper` at batch {batch} and {pb} (Projection)"),
        (f"(b) {CLAIMS['b']['statement']}",
         f"{V.sentence(vb)}: shared / isolated storage rows {vb['figure']}", NA, NA, NA,
         f"2 devices, batch {batch}, {mem}, W = 8, cache rows / distinct rows per iteration "
         f"{'n/a' if si_regime is None else f'{si_regime:.1f}'}", vb["rule"],
         "`lsm-gnn simulate D --trace trace-g2.npz --mode shared` / `--mode isolated` (Cache policies)"),
        (f"(c) {CLAIMS['c']['statement']}",
         f"{V.sentence(vc)}: {vc['figure']}", NA, NA, NA,
         f"1 device, {mem}, no victim buffer (every row a cache line), every batch and W of the PVP study; "
         "each point's cache rows / distinct rows per iteration in brackets in the verdict", vc["rule"],
         "`lsm-gnn simulate D --trace T --policy hybrid --policy static --policy dynamic --no-victim --window W` "
         "(PVP study); with the buffer: `--policy all` and the regime sweep (Cache policies)"),
        (f"(d) {CLAIMS['d']['statement']}",
         f"{V.sentence(vd)}: {vd['figure']}", NA, NA, NA,
         f"1 device, batch {batch}, {mem} in all (cache + queues + landing buffer), W = 8, host share "
         f"{dh.get('host_share', 'n/a')}: queue depth / spill attempts per iteration "
         f"{'n/a' if dh.get('depth_per_spill') is None else format(dh['depth_per_spill'], '.3g')}", vd["rule"],
         "`lsm-gnn simulate D --trace T --policy hybrid --victim --host-fraction H` against `--no-victim` (PVP study)"),
        (f"(d) {CLAIMS['d_authors']['statement']}",
         f"{V.sentence(da)}: {da['figure']}", NA, NA, NA,
         f"1 device, W = 8, the cache at {mem} as without the buffer, plus queues of the authors' depth in extra "
         "pinned host memory (not equal memory)", vd["rule"],
         "`lsm-gnn simulate D --trace T --policy hybrid --victim --victim-depth 32768` with the queues beside the "
         "budget (PVP study)"),
        (f"(e) {CLAIMS['e']['statement']}",
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


def _reason(v: dict) -> str:
    """Why a column does not count, in a clause: its `why` after "but", up to the first colon."""
    why = v.get("why") or ""
    why = why.split(", but ", 1)[1] if ", but " in why else why
    return why.split("): ", 1)[0] + (")" if "): " in why else "")


def _ev(kind: str, value, lo, hi, counted: bool, text: str, reason: str = "") -> dict | None:
    if value is None:
        return None
    lo = value if lo is None else lo
    hi = value if hi is None else hi
    return {"kind": kind, "value": float(value), "min": float(min(lo, value)), "max": float(max(hi, value)),
            "counted": bool(counted), "text": text, "reason": "" if counted else reason}


def _range_x(v, lo, hi) -> str:
    return f"{v:.2f}x [{lo:.2f}-{hi:.2f}]"


def findings(figs: dict, va: dict, ve: dict, measured: dict, testbed: dict | None, prange: dict,
             summary: pd.DataFrame, comm: dict, batch: int, paper_batch: int) -> list[dict]:
    """One entry per claim (CLAIMS' order): the verdict and its kind, and each kind of evidence's
    figure with its range over the runs, points or assumptions, and whether it counted (a hollow
    mark in the claims figure, with the reason)."""
    f, vs = figs["figures"], figs["verdicts"]
    cols = va["columns"]
    out = []

    # (a) measured here: the medians' ratio, its range from the systems' run min-max
    ev = []
    emu = emulated_rows(summary)
    lsm, dd = emu[(emu.system == "lsm") & (emu.devices == 2)], emu[emu.system == "distdgl"]
    r = measured.get("ratio")
    if r is not None and not lsm.empty and not dd.empty:
        lo = float(dd.steady_min.iloc[0] / lsm.steady_max.iloc[0])
        hi = float(dd.steady_max.iloc[0] / lsm.steady_min.iloc[0])
        c = cols[V.MEASURED]
        ev.append(_ev(V.MEASURED, r, lo, hi, c["verdict"] in DECIDED, _range_x(r, min(lo, r), max(hi, r)), _reason(c)))
    tb = ((testbed or {}).get("batches") or {}).get(str(paper_batch), {}).get("distdgl_vs_lsm") or {}
    if tb.get("median") is not None:
        c = cols[V.EMULATED]
        ev.append(_ev(V.EMULATED, tb["median"], tb.get("min"), tb.get("max"), c["verdict"] in DECIDED,
                      _range_x(tb["median"], tb.get("min", tb["median"]), tb.get("max", tb["median"]))
                      + f" at batch {paper_batch}", _reason(c)))
    pr = (prange.get("batches") or {}).get(str(paper_batch)) or {}
    if pr.get("base") is not None:
        c = cols[V.PROJECTED]
        ev.append(_ev(V.PROJECTED, pr["base"], pr.get("min"), pr.get("max"), c["verdict"] in DECIDED,
                      _range_x(pr["base"], pr["min"], pr["max"]) + f" at batch {paper_batch}", _reason(c)))
    out.append({"claim": "a", "verdict": va["verdict"], "kind": va["kind"], "evidence": [e for e in ev if e]})

    # (b) shared / isolated storage rows: hybrid, the range over the policies simulated
    sv = f["shared_vs_isolated"]["ratio"]
    vb = vs["b"]
    ev = [_ev(V.SIMULATED, sv["hybrid"], min(sv.values()), max(sv.values()), vb["verdict"] in DECIDED,
              f"hybrid {sv['hybrid']:.3f} [{min(sv.values()):.3f}-{max(sv.values()):.3f} over the policies]",
              vb["why"])] if sv.get("hybrid") is not None else []
    out.append({"claim": "b", "verdict": vb["verdict"], "kind": vb["kind"], "evidence": [e for e in ev if e]})

    # (c) hybrid over the better of static and dynamic without the buffer: the headline point, the
    # range over the PVP study's no-buffer points
    pts = f.get("pvp", {}).get("points", {})
    ratios = {}
    for key, p in pts.items():
        pol, b, w, h = key.split()
        if pol == "hybrid" and h == "h0" and f"static {b} {w} h0" in pts and f"dynamic {b} {w} h0" in pts:
            other = min(pts[f"static {b} {w} h0"]["storage_rows_vs_min"], pts[f"dynamic {b} {w} h0"]["storage_rows_vs_min"])
            ratios[(b, w)] = p["storage_rows_vs_min"] / other
    vc = vs["c"]
    head = ratios.get((f"b{batch}", "W8"))
    ev = [_ev(V.SIMULATED, head, min(ratios.values()), max(ratios.values()), vc["verdict"] in DECIDED,
              f"{head:.3f} at batch {batch}, W = 8 [{min(ratios.values()):.3f}-{max(ratios.values()):.3f} over "
              f"{len(ratios)} points]", vc["why"])] if head is not None else []
    out.append({"claim": "c", "verdict": vc["verdict"], "kind": vc["kind"], "evidence": [e for e in ev if e]})

    # (d) at equal memory: with / without the buffer at the same batch and W, over the study's shares
    vd = vs["d"]
    with_without = {}
    for key, p in pts.items():
        pol, b, w, h = key.split()
        if pol == "hybrid" and h != "h0" and f"hybrid {b} {w} h0" in pts:
            with_without[key] = p["storage_rows_vs_min"] / pts[f"hybrid {b} {w} h0"]["storage_rows_vs_min"]
    dh = figs.get("claim_inputs", {}).get("d_headline") or {}
    head = dh["with"] / dh["without"] if dh.get("with") is not None and dh.get("without") else None
    ev = [_ev(V.SIMULATED, head, min(with_without.values(), default=head), max(with_without.values(), default=head),
              vd["verdict"] in DECIDED, f"{head:.3f} at batch {batch}, W = 8, host share {dh.get('host_share')} "
              f"[{min(with_without.values(), default=head):.3f}-{max(with_without.values(), default=head):.3f} over "
              f"{len(with_without)} points]", vd["why"])] if head is not None else []
    out.append({"claim": "d", "verdict": vd["verdict"], "kind": vd["kind"], "evidence": [e for e in ev if e]})

    # (d) at the authors' configuration: hybrid with / without at each batch
    da = vd.get("authors") or {}
    au = {k: a["with_over_without"] for k, a in (f.get("pvp", {}).get("authors") or {}).items()
          if k.startswith("hybrid ") and a.get("with_over_without") is not None}
    ev = []
    if au:
        v = min(au.values())
        ev = [_ev(V.SIMULATED, v, v, max(au.values()), da.get("verdict") in DECIDED,
                  "; ".join(f"{k.split()[1].replace('b', 'batch ')} {x:.3f}" for k, x in au.items()), da.get("why", ""))]
    out.append({"claim": "d_authors", "verdict": da.get("verdict", V.NOT_MEASURED), "kind": V.SIMULATED if au else None,
                "evidence": [e for e in ev if e]})

    # (e) the exchange's share of the epoch over the timed runs
    ev = [_ev(V.MEASURED, comm["median"], comm.get("min"), comm.get("max"), ve["verdict"] in DECIDED,
              f"{100 * comm['median']:.1f} % [{100 * comm['min']:.1f}-{100 * comm['max']:.1f} %] over "
              f"{comm.get('runs')} runs", ve["why"])] if comm.get("median") is not None else []
    out.append({"claim": "e", "verdict": ve["verdict"], "kind": ve["kind"], "evidence": [e for e in ev if e]})

    for o in out:
        o.update({k: CLAIMS[o["claim"]][k] for k in ("statement", "paper", "measure", "threshold", "holds", "section")})
        o["paper_value"] = CLAIMS[o["claim"]].get("paper_value", False)
        o["label"] = claim_label(o["claim"])
    # where the testbed ran, claim (a)'s decisive data is its section, not the baselines'
    if testbed:
        out[0]["section"] = "Paper testbed"
    return out


def claim_label(c: str) -> str:
    """How the report names a claim: (a)-(e); the authors' configuration of (d) is (d) as well."""
    return "(d)" if c == "d_authors" else f"({c})"


def first_screen(found: list[dict]) -> str:
    """A sentence per claim: its verdict in bold, the evidence that decided it, and each kind that
    did not count with why."""
    lines = []
    for c in found:
        kind = c["kind"]
        decided = [e for e in c["evidence"] if e["kind"] == kind and e["counted"]]
        others = [e for e in c["evidence"] if not (e["kind"] == kind and e["counted"])]
        text = f"- **{claim_label(c['claim'])}** {c['statement']} (the paper: {c['paper']}): **{c['verdict']}**"
        if decided:
            text += f", {kind}: {decided[0]['text']}"
        for e in others:
            text += f"; {e['kind']}: {e['text']}" + (f" (not counted: {e['reason']})" if not e["counted"] else "")
        lines.append(text + ".")
    return "\n".join(lines)


KIND_MARKERS = {V.SIMULATED: "s", V.MEASURED: "o", V.EMULATED: "D", V.PROJECTED: "^"}
PAPER_LINE = {"color": "#d62728", "linestyle": "--"}
READING_LINE = {"color": "#555555", "linestyle": ":"}


def claims_figure(found: list[dict], path) -> None:
    """One panel per claim: each kind of evidence's figure with its range (a filled mark where it
    counted, hollow where a validation failed or the runs spread too much) and the value where the
    claim's reading changes (the paper's 3.75x for (a))."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    from figtools import save_figure

    rows = [c for c in found if c["evidence"]]
    fig, axes = plt.subplots(len(rows), 1, figsize=(8.5, 1.25 + 0.55 * sum(len(c["evidence"]) for c in rows)
                                                   + 0.6 * len(rows)), squeeze=False,
                             gridspec_kw={"height_ratios": [max(len(c["evidence"]), 1) + 1 for c in rows]})
    for ax, c in zip(axes[:, 0], rows):
        pct = c["claim"] == "e"
        k = 100.0 if pct else 1.0
        ev = c["evidence"]
        ys = list(range(len(ev)))[::-1]
        for y, e in zip(ys, ev):
            colour = "black" if e["counted"] else "#888888"
            ax.errorbar([k * e["value"]], [y], xerr=[[k * (e["value"] - e["min"])], [k * (e["max"] - e["value"])]],
                        fmt=KIND_MARKERS.get(e["kind"], "o"), color=colour, ecolor=colour, capsize=4, markersize=8,
                        markerfacecolor=colour if e["counted"] else "white", zorder=5)
        # the paper's own number dashed red; where the reading changes and the paper gives no number, dotted grey
        ax.axvline(k * c["threshold"], zorder=2, linewidth=1.2,
                   **(PAPER_LINE if c.get("paper_value") else READING_LINE))
        ax.set_yticks(ys)
        ax.set_yticklabels([f"{e['kind']}{'' if e['counted'] else ' (not counted)'}\n{e['text']}" for e in ev],
                           fontsize=8)
        ax.set_ylim(-0.7, len(ev) - 0.3)
        if c["claim"] == "a":
            ax.set_xscale("log")
        lo = min([k * e["min"] for e in ev] + [k * c["threshold"]])
        hi = max([k * e["max"] for e in ev] + [k * c["threshold"]])
        if c["claim"] == "a":
            ax.set_xlim(lo / 1.6, hi * 1.6)
            thr = c["threshold"]
            # no fixed tick within a factor 1.5 of the paper's value: 3.75 and 5 read as "3.755" side by side
            ticks = [t for t in (0.1, 0.25, 0.5, 1, 2, thr, 5, 10, 20, 50, 100)
                     if lo / 1.6 <= t <= hi * 1.6 and (t == thr or not thr / 1.5 < t < thr * 1.5)]
            ax.set_xticks(ticks)
            ax.set_xticklabels([f"{t:g}" for t in ticks])
            ax.minorticks_off()
        else:
            pad = 0.12 * (hi - lo or 1.0)
            ax.set_xlim(max(lo - pad, 0.0), hi + pad)
        ax.set_xlabel(c["measure"], fontsize=9)
        ax.set_ylabel("evidence", fontsize=9)
        ax.set_title(f"{claim_label(c['claim'])} {c['statement']}: {c['verdict']}", fontsize=9, loc="left")
        ax.grid(axis="x", alpha=0.3)
    handles = [Line2D([], [], color="black", marker="o", linestyle="none", label="counted"),
               Line2D([], [], color="#888888", marker="o", markerfacecolor="white", linestyle="none",
                      label="not counted (a validation failed, or the runs spread 5 % or more)"),
               Line2D([], [], label="the paper's value", **PAPER_LINE),
               Line2D([], [], label="where the reading changes (the paper gives no number)", **READING_LINE)]
    fig.legend(handles=handles, loc="lower center", ncol=1, fontsize=8, frameon=False, bbox_to_anchor=(0.5, 0.0))
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    # one left edge for every panel (their tick labels differ in width), so the axes line up
    boxes = [ax.get_position() for ax in axes[:, 0]]
    x0, x1 = max(b.x0 for b in boxes), min(b.x1 for b in boxes)
    for ax, b in zip(axes[:, 0], boxes):
        ax.set_position([x0, b.y0, x1 - x0, b.height])
    save_figure(fig, path)
    plt.close(fig)


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
    comm = comm_inputs(ratios, bench)
    ve = V.claim_e(comm)
    found = findings(figs, va, ve, measured, testbed, prange, summary, comm, int(sm.params.batch),
                     int(sm.params.paper_batch))
    write_json(sm.output.timings, {**timings(summary, ratios, prange, measured), "verdict_a": va, "verdict_e": ve,
                                   "findings": found})
    write_json(sm.output.machine, machine())
    claims_figure(found, sm.output.figure)
    tab, rules = table(figs, va, ve, measured, sm.params, ratios)
    text = f"""## Verdicts: the paper's claims on this run

{first_screen(found)}

![each claim: the paper's value beside each kind of evidence](figures/{Path(str(sm.output.figure)).name})

Each row of the figure is one kind of evidence with its range (runs, points or assumptions); a
hollow mark did not count. The table below gives every cell in full, then the rules and commands.

### Every kind of evidence, in full

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
