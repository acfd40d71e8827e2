"""The verdict on each of the paper's claims, computed from the workflow's data by the rules below
(the report's verdicts table, figures.json and timings.json).

Claims (LSM-GNN, Park et al., arXiv 2407.15264, abstract and evaluation):
  (a) one node with 2 GPUs beats Dist-DGL on 2 nodes x 2 GPUs, up to 3.75x on end-to-end epoch time;
  (b) the shared cache lowers storage accesses against isolated per-GPU caches;
  (c) the hybrid policy beats static-only and dynamic-only eviction;
  (d) the victim buffer + PVP lowers storage pressure.

The words of a verdict are one of HOLDS, PARTLY ("holds only when ..."), NOT_HERE ("does not hold
here") and NOT_MEASURED; each rule says which data decide it. (b), (c) and (d) come from counts of
the trace simulator: they do not depend on the machine, and the same seed and settings give the
same verdict anywhere (figures.json). (a) rests on timings: the emulated-accelerator matrix
(replicated, spread stated) and the projection onto the paper's setting (timings.json).
"""

from __future__ import annotations

HOLDS = "holds"
PARTLY = "holds only when"
NOT_HERE = "does not hold here"
NOT_MEASURED = "not measured here"

PAPER_SPEEDUP = 3.75      # the abstract's "up to 3.75x" over Dist-DGL
SPREAD_LIMIT = 0.05       # a timed figure counts when its repeated runs spread less (MLPerf Storage)


def _x(v) -> str:
    return "n/a" if v is None else f"{v:.2f}x"


def _r(v) -> str:
    return "n/a" if v is None else f"{v:.3f}"


def claim_b(shared_vs_isolated: dict[str, float]) -> dict:
    """(b) Rule: the shared cache lowers storage accesses under a policy when its storage rows over
    the isolated caches' (same trace, same memory per device) are below 1. HOLDS when below 1 for
    every policy simulated, PARTLY when for some, NOT_HERE when for none."""
    lower = sorted(p for p, r in shared_vs_isolated.items() if r < 1.0)
    if not shared_vs_isolated:
        word, text = NOT_MEASURED, "no 2-device simulation in this run"
    elif len(lower) == len(shared_vs_isolated):
        word, text = HOLDS, "shared < isolated storage rows under every policy simulated"
    elif lower:
        word, text = PARTLY, f"the policy is {', '.join(lower)} (shared < isolated only there)"
    else:
        word, text = NOT_HERE, "shared >= isolated storage rows under every policy simulated"
    return {"claim": "b", "verdict": word, "why": text,
            "figure": ", ".join(f"{p} {_r(r)}" for p, r in sorted(shared_vs_isolated.items())),
            "rule": rule_text(claim_b.__doc__)}


def claim_c(points: list[dict], without_buffer: dict | None = None) -> dict:
    """(c) Rule: hybrid beats static-only and dynamic-only at a point (one trace, one memory, one W)
    when its storage rows are below both of theirs. HOLDS when at every point (the headline and
    the regime sweep's batch sizes), PARTLY when at some (the verdict names the regime, cache rows
    / distinct rows per iteration, of those points), NOT_HERE when at none.

    points: [{"label", "ratio" (cache rows / distinct rows per iteration), "hybrid", "static",
    "dynamic" (storage rows / MIN)}], the headline first, every policy with the victim buffer at
    the config's share (the paper's configuration); without_buffer: {policy: storage rows / MIN}
    at the headline without the buffer, stated beside the verdict (it does not decide it)."""
    pts = [p for p in points if None not in (p.get("hybrid"), p.get("static"), p.get("dynamic"))]
    wins = [p for p in pts if p["hybrid"] < min(p["static"], p["dynamic"])]
    if not pts:
        word, text = NOT_MEASURED, "no point with hybrid, static and dynamic"
    elif len(wins) == len(pts):
        word, text = HOLDS, f"hybrid reads the fewest storage rows of the three at all {len(pts)} points"
    elif wins:
        where = ", ".join(f"{p['label']} ({p['ratio']:.1f})" for p in wins)
        lose = ", ".join(f"{p['label']} ({p['ratio']:.1f})" for p in pts if p not in wins)
        word, text = PARTLY, (f"cache rows / distinct rows per iteration is as at {where}; "
                              f"not at {lose}")
    else:
        word, text = NOT_HERE, f"hybrid reads no fewer storage rows than static or dynamic at any of {len(pts)} points"
    head = pts[0] if pts else {}
    fig = (f"{head.get('label', '')}: rows / MIN hybrid {_r(head.get('hybrid'))}, static {_r(head.get('static'))}, "
           f"dynamic {_r(head.get('dynamic'))}" if head else "n/a")
    nb = without_buffer or {}
    if {"hybrid", "static", "dynamic"} <= set(nb):
        beats = nb["hybrid"] < min(nb["static"], nb["dynamic"])
        fig += (f"; without the victim buffer: hybrid {_r(nb['hybrid'])}, static {_r(nb['static'])}, dynamic "
                f"{_r(nb['dynamic'])} (hybrid {'beats' if beats else 'does not beat'} both)")
    return {"claim": "c", "verdict": word, "why": text, "figure": fig, "points": len(pts), "wins": len(wins),
            "rule": rule_text(claim_c.__doc__)}


def claim_d(headline: dict | None, boundary: dict | None) -> dict:
    """(d) Rule: the victim buffer + PVP lowers storage pressure at a point when hybrid with it
    reads fewer storage rows than hybrid without it at the same total memory (the host tier's
    rows given to cache lines). HOLDS when at every point of the PVP study (host share, W, batch),
    PARTLY when at some (the verdict gives the boundary in queue depth / spill attempts per
    iteration when one separates them), NOT_HERE when at none.

    headline: the point at the run's batch, W = 8 and the config's share ({"with", "without"
    storage rows, "depth_per_spill", "dropped_per_iteration", "spill_attempts_per_iteration"});
    boundary: pvp.json's hybrid boundary ({"points", "paying", "pays_from", "fails_up_to", "separable"})."""
    b = boundary or {}
    if not b.get("points"):
        word, text = NOT_MEASURED, "no PVP study in this run"
    elif b["paying"] == b["points"]:
        word, text = HOLDS, f"hybrid with the buffer reads fewer storage rows at all {b['points']} points"
    elif b["paying"]:
        if b.get("separable"):
            text = (f"queue depth / spill attempts per iteration >= {b['pays_from']:.3g} (pays at {b['paying']} of "
                    f"{b['points']} points; not at {b['fails_up_to']:.3g} and below)")
        else:
            text = (f"at {b['paying']} of {b['points']} points, with no clean boundary in queue depth / spill "
                    f"attempts per iteration (pays from {b['pays_from']:.3g}, fails up to {b['fails_up_to']:.3g})")
        word = PARTLY
    else:
        word, text = NOT_HERE, (f"at none of {b['points']} points does hybrid with the buffer read fewer storage "
                                "rows than without it at the same total memory")
    h = headline or {}
    fig = "n/a"
    if h.get("with") is not None and h.get("without"):
        fig = (f"hybrid storage rows with / without the buffer {h['with'] / h['without']:.3f} "
               f"({h['with']:,} / {h['without']:,}); spill attempts {h.get('spill_attempts_per_iteration') or 0:,.4g} "
               f"and dropped {h.get('dropped_per_iteration') or 0:,.4g} per iteration")
    return {"claim": "d", "verdict": word, "why": text, "figure": fig,
            "rule": rule_text(claim_d.__doc__)}


def claim_a(measured: dict, projected: dict) -> dict:
    """(a) Rule: on the paper's setting (lsm-gnn project, profile paper) at the paper's batch,
    HOLDS when Dist-DGL / LSM-GNN epoch >= 3.75 in the base case; PARTLY when LSM-GNN is faster
    (> 1) in the base case but short of 3.75 (the verdict says whether 3.75 lies inside the range
    over the stated assumptions); NOT_HERE when <= 1. Beside it, the measurement here with emulated
    accelerators counts only when both systems' repeated runs spread less than 5 % (else
    NOT_MEASURED), and is classified by the same thresholds.

    measured: {"ratio", "spread_lsm", "spread_distdgl", "runs", "accelerator", "au_lsm"};
    projected: {batch: {"base", "min", "max"}} with "paper_batch" and "run_batch" keys beside."""
    pb, rb = projected.get("paper_batch"), projected.get("run_batch")
    at = projected.get(str(pb)) or {}
    base = at.get("base")
    if base is None:
        word, text = NOT_MEASURED, "no projection at the paper's batch (no LSM-GNN or Dist-DGL record)"
    elif base >= PAPER_SPEEDUP:
        word, text = HOLDS, f"projected {_x(base)} at batch {pb} reaches {PAPER_SPEEDUP}x"
    elif base > 1.0:
        inside = at["min"] <= PAPER_SPEEDUP <= at["max"]
        word = PARTLY
        text = (f"the claim is read as 'faster', not as {PAPER_SPEEDUP}x: projected {_x(base)} at batch {pb} "
                f"({_x(at['min'])}-{_x(at['max'])} over the assumptions; {PAPER_SPEEDUP}x "
                + ("inside that range)" if inside else "beyond every assumption tried)"))
    else:
        word, text = NOT_HERE, f"projected {_x(base)} at batch {pb}: Dist-DGL is as fast or faster"
    ours = projected.get(str(rb)) or {}
    m = measured or {}
    spreads = [s for s in (m.get("spread_lsm"), m.get("spread_distdgl")) if s is not None]
    if m.get("ratio") is None:
        meas_word, meas = NOT_MEASURED, "no Dist-DGL or LSM-GNN run"
    elif (m.get("runs") or 0) < 2 or len(spreads) < 2:
        meas_word = NOT_MEASURED
        meas = f"{_x(m['ratio'])} from {m.get('runs') or 0} run(s) per system: no spread (2 runs at least)"
    elif max(spreads) >= SPREAD_LIMIT:
        meas_word = NOT_MEASURED
        meas = (f"{_x(m['ratio'])} from medians of {m.get('runs')} runs, but the runs spread "
                + ", ".join(f"{100 * s:.1f} %" for s in spreads) + f" (limit {100 * SPREAD_LIMIT:.0f} %)")
    else:
        r = m["ratio"]
        meas_word = HOLDS if r >= PAPER_SPEEDUP else (PARTLY if r > 1.0 else NOT_HERE)
        meas = f"{_x(r)} (medians of {m['runs']} runs, spread " + ", ".join(f"{100 * s:.1f} %" for s in spreads) + ")"
    return {"claim": "a", "verdict": word, "why": text, "measured_verdict": meas_word,
            "figure": (f"emulated {m.get('accelerator')}: {meas}; projected (paper setting): batch {pb} {_x(base)} "
                       f"[{_x(at.get('min'))}-{_x(at.get('max'))}], batch {rb} {_x(ours.get('base'))} "
                       f"[{_x(ours.get('min'))}-{_x(ours.get('max'))}]"),
            "rule": rule_text(claim_a.__doc__)}


def rule_text(doc: str) -> str:
    """The rule paragraph of a claim function's docstring, on one line."""
    return " ".join(doc.split("Rule: ", 1)[1].split("\n\n")[0].split())


def sentence(v: dict) -> str:
    """The verdict column's words: 'holds', 'holds only when ...', 'does not hold here (...)'."""
    if v["verdict"] == HOLDS:
        return f"**holds** ({v['why']})"
    if v["verdict"] == PARTLY:
        return f"**holds only when** {v['why']}"
    if v["verdict"] == NOT_HERE:
        return f"**does not hold here** ({v['why']})"
    return f"**not measured here** ({v['why']})"
