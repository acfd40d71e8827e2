"""The paper's testbed, emulated: summary.json (the verdicts read it), summary.csv, the epoch figure
and the report section 65-testbed.md.

Inputs: the testbed's run records (results/<ds>/testbed/runs/{system}-b{batch}-{profile}-s{scale}-
r{round}.json: `paper` at the matrix's scale S and, for the dilation check, at 2 S; `vm` at S = 1
and the real disk for the emulator check) and the projection of the largest batch's records on the
paper's hardware profile. Every time is divided back by its run's scale (bench compare's
summarise_run). The three checks are bench compare's own (lsm_gnn/bench/compare.py: validation), on
outputs built from the records as bench compare builds them (summarise_system per system).
"""


import json
import re
import statistics
from pathlib import Path

# a run's reads may come back late by at most 1 % of its storage time (docs/storage.md), and the
# projection of an emulated run within 10 % of it: each written once, where it is enforced
from lsm_gnn.project.emulated import LIMIT as PROJECTION_LIMIT
from lsm_gnn.storage.emulated import LATENESS_LIMIT as PACING_LIMIT

NAME = re.compile(r"^(?P<system>[a-z]+)-b(?P<batch>\d+)-(?P<profile>paper|vm|real)-s(?P<scale>[0-9.]+)"
                  r"(?:-f(?P<host_speed>[0-9.]+))?-r(?P<round>\d+)$")
SYSTEM_ORDER = ("lsm", "isolated", "direct", "distdgl")
NETWORK_WORDS = {
    "charged": ("charged in user space at the paper profile's NIC: each round trip to another machine "
                "RTT x S, the remote rows' bytes at its rate (lsm_gnn/testbed.py)"),
    "emulated": "shaped with tc to the paper profile's NIC on the same scale, rate and delay",
    "rate": ("shaped with tc to the paper profile's NIC's rate on the same scale; its delay is left out "
             "(this kernel has no sch_netem), which makes Dist-DGL faster by at most the delay of its "
             "counted round trips: the ratio is shown with that delay added back beside it"),
    "real": "unshaped (the veths as the kernel runs them)",
}


def load_runs(paths) -> list[dict]:
    """Each record with its point (system, batch, profile, scale, round) from its file name, and
    bench compare's summary of it (summarise_run: times divided back by the run's scale)."""
    from lsm_gnn.bench.replicate import summarise_run
    from lsm_gnn.records import read_record

    out = []
    for p in map(Path, paths):
        m = NAME.match(p.stem)
        if not m:
            raise ValueError(f"{p}: not a testbed run record name ({{system}}-b{{batch}}-{{profile}}-s{{scale}}-r{{round}})")
        rec = read_record(p)
        s = summarise_run(rec)
        net = ((rec.get("metrics") or {}).get("distdgl") or {}).get("network_emulation")
        tb_parts = (((rec.get("metrics") or {}).get("testbed") or {}).get("parts") or {})
        out.append({"system": m["system"], "batch": int(m["batch"]), "profile": m["profile"],
                    "scale": float(m["scale"]), "round": int(m["round"]), "path": str(p),
                    "host_speed": None if m["host_speed"] is None else float(m["host_speed"]),
                    "summary": {**s, "round": int(m["round"])},
                    "late_fraction": (s.get("storage_emulation") or {}).get("lateness_fraction"),
                    # every charged part's lateness (lsm_gnn/testbed.py's parts), the SSD's above
                    "parts_late": {k: v.get("late_fraction") for k, v in tb_parts.items()
                                   if v.get("late_fraction") is not None},
                    # the emulated testbed charges the NIC itself (its links unshaped)
                    "network_mode": "charged" if "nic" in tb_parts else (net or {}).get("mode"),
                    "missing_delay_epoch_s": (net or {}).get("missing_delay_epoch_s")})
    return out


def compare_output(runs: list[dict], *, profile: str, scale: float, accelerator: str, source: str) -> dict:
    """The runs of one (batch, profile, scale) point as a bench compare output (what its validation
    reads): `scale` the point's, each system's own in `time_scale_by_system` (testbed_system_scales)."""
    from lsm_gnn.bench.replicate import summarise_system

    by = {}
    for r in sorted(runs, key=lambda r: r["round"]):
        by.setdefault(r["system"], []).append(r["summary"])
    return {"benchmark": "compare", "source": source, "accelerator": accelerator, "time_scale": scale,
            "time_scale_by_system": {r["system"]: r["scale"] for r in runs},
            "storage_device": "real" if profile == "real" else "emulated",
            "storage_profile": None if profile == "real" else profile,
            "systems": {s: summarise_system(v) for s, v in by.items()}}


def _valid(runs: list[dict]) -> list[dict]:
    """The runs (load_runs' form) whose summaries bench compare's valid_runs keeps."""
    from lsm_gnn.bench.replicate import valid_runs

    keep = [id(x) for x in valid_runs([r["summary"] for r in runs])]
    return [r for r in runs if id(r["summary"]) in keep]


def ratio(runs: list[dict], system: str) -> dict:
    """system's steady epoch over lsm's: the medians' ratio, and min / max over the runs paired by round.
    Where system's link lacked the profile's delay (Dist-DGL at network_emulation `rate`), the same
    with that delay added back (`*_with_delay`): the ratio lies between the two."""
    # each system's valid runs (bench compare's valid_runs), paired by round where both are
    e = {s: {r["round"]: r["summary"]["epoch_steady_s"] for r in _valid([r for r in runs if r["system"] == s])}
         for s in (system, "lsm")}
    miss = {r["round"]: r.get("missing_delay_epoch_s") or 0.0 for r in runs if r["system"] == system}
    med = {s: statistics.median(v.values()) if v else None for s, v in e.items()}
    paired = [e[system][k] / e["lsm"][k] for k in sorted(e[system]) if e["lsm"].get(k) and e[system][k] is not None]
    out = {"median": med[system] / med["lsm"] if med[system] and med["lsm"] else None,
           "min": min(paired) if paired else None, "max": max(paired) if paired else None,
           "paired_by_round": paired}
    if any(miss.values()) and out["median"] is not None:
        plus = {k: e[system][k] + miss.get(k, 0.0) for k in e[system]}  # (e: valid rounds only)
        pd = [plus[k] / e["lsm"][k] for k in sorted(plus) if e["lsm"].get(k)]
        out.update({"missing_delay_epoch_s": statistics.median(miss.values()),
                    "median_with_delay": statistics.median(plus.values()) / med["lsm"],
                    "min_with_delay": min(pd), "max_with_delay": max(pd)})
    return out


def network_mode(runs: list[dict], requested: str) -> str:
    """What Dist-DGL's links were, from its records (`charged`: in user space by the testbed's charges,
    `emulated`, `rate`, `real`; a mix: the weakest),
    or the config's value where no record says (no Dist-DGL run, or records from before the field)."""
    modes = {r["network_mode"] for r in runs if r["system"] == "distdgl" and r.get("network_mode")}
    for m in ("real", "rate", "emulated", "charged"):
        if m in modes:
            return m
    return requested


def system_row(runs: list[dict]) -> dict:
    """One system's figures over its valid runs (bench compare's valid_runs: none if none is); the counts, the worst lateness and the causes over every run."""
    ok = _valid(runs)
    if not ok:  # no valid run: no figure (bench compare's valid_runs), the causes still shown
        return {"median_s": None, "min_s": None, "max_s": None, "spread": None, "runs": len(runs), "valid_runs": 0,
                "au": None, "cpu_share": None, "bound": None,
                "late_fraction_max": max((r["late_fraction"] for r in runs if r["late_fraction"] is not None),
                                         default=None),
                "invalid_causes": sorted({c for r in runs for c in r["summary"].get("invalid_causes") or []}),
                "per_iteration": None}
    ep = [r["summary"]["epoch_steady_s"] for r in ok]
    med = statistics.median(ep)

    def median_of(key):
        v = [r["summary"].get(key) for r in ok if r["summary"].get(key) is not None]
        return statistics.median(v) if v else None

    return {"median_s": med, "min_s": min(ep), "max_s": max(ep), "spread": (max(ep) - min(ep)) / med if med else None,
            "runs": len(runs), "valid_runs": sum(1 for r in runs if r["summary"].get("valid") is not False),
            "au": median_of("au"), "cpu_share": median_of("cpu_share"), "bound": ok[0]["summary"].get("bound"),
            "late_fraction_max": max((r["late_fraction"] for r in runs if r["late_fraction"] is not None), default=None),
            "invalid_causes": sorted({c for r in runs for c in r["summary"].get("invalid_causes") or []}),
            "per_iteration": ok[min(range(len(ok)), key=lambda i: abs(ep[i] - med))]["summary"].get("per_iteration")}


def projection_entry(projection: dict | None, measured: dict, batch: int) -> dict:
    """The projection against the emulation at the largest batch (bench validate's
    `projection_vs_emulation` over LSM-GNN's and Dist-DGL's records, each projected with the machine
    its emulation had): each system's median error over its valid runs, and Dist-DGL / LSM-GNN
    projected (the medians of the valid runs' projected epochs) against the measured ratio
    (`measured`: the batch's distdgl_vs_lsm; with a rate-only link, the one with the left-out delay
    added back, since the projection charges the NIC's latency on every round trip). Met when both
    systems' errors and the ratio's are within the limit."""
    pe = (projection or {}).get("projection_vs_emulation") or {}
    systems = pe.get("systems") or {}

    def projected(system):
        runs = [r for r in (systems.get(system) or {}).get("runs") or [] if r["valid"]]
        return statistics.median(r["projected_epoch_s"] for r in runs) if runs else None

    d, l_ = projected("distdgl"), projected("lsm")
    ratio = d / l_ if (d and l_) else None
    compared = measured.get("median_with_delay", measured.get("median"))
    err = ratio / compared - 1.0 if (ratio and compared) else None
    by_system = {s: x.get("error") for s, x in systems.items()}
    met = None if err is None else (bool(pe.get("ok")) and abs(err) <= PROJECTION_LIMIT)
    return {"batch": batch, "distdgl_vs_lsm": ratio, "measured": measured.get("median"),
            "measured_with_delay": measured.get("median_with_delay"), "relative_error": err,
            "by_system": by_system, "bounds": {s: {"projected": x.get("projected_bound"), "emulated": x.get("emulated_bound")}
                                               for s, x in systems.items()},
            "met": met, "limit": PROJECTION_LIMIT, "hardware": ", ".join(pe.get("profiles") or []) or None}


def summarise(runs: list[dict], projection: dict | None, *, scale: float, accelerator: str, devices: int,
              fraction: float, dataset: str, batches: list[int], validation_batch: int,
              system_scales: dict | None = None, host_speed: float = 1.0) -> dict:
    """summary.json (the schema the verdicts read; docs/workflow.md, "The paper testbed"). A system
    of `system_scales` runs at its own scale (testbed_system_scales), the others at `scale`; the
    matrix at `host_speed` f (the hardware profile's), Dist-DGL's extra runs (`-f{f}` in their names)
    at the largest batch at other f for the verdict's class."""
    from lsm_gnn.bench.validate import validation

    def own(system: str) -> float:
        return float((system_scales or {}).get(system, scale))

    at_f = [r for r in runs if r.get("host_speed") is not None]
    runs = [r for r in runs if r.get("host_speed") is None]
    main = [r for r in runs if r["profile"] == "paper" and r["scale"] == own(r["system"])]
    out = {"kind": "emulated", "storage_profile": "paper", "time_scale": scale, "accelerator": accelerator,
           "time_scale_by_system": {s: own(s) for s in sorted({r["system"] for r in runs})},
           "devices": devices, "memory_fraction": fraction, "dataset": dataset, "batches": {}}
    outputs = {}
    for b in batches:
        rb = [r for r in main if r["batch"] == b]
        systems = {s: system_row([r for r in rb if r["system"] == s]) for s in SYSTEM_ORDER
                   if any(r["system"] == s for r in rb)}
        entry = {"systems": systems}
        for s in systems:
            if s != "lsm" and "lsm" in systems:
                entry[f"{s}_vs_lsm"] = ratio(rb, s)
        out["batches"][str(b)] = entry
        outputs[b] = compare_output(rb, profile="paper", scale=scale, accelerator=accelerator,
                                    source=f"paper S={scale:g} batch {b}")
    # the three checks: bench compare's validation over the matrix's output at the validation batch,
    # the 2 S output (dilation) and the vm and real-disk outputs (emulator vs real)
    extra = []
    for profile, k, sc in (("paper", 2.0, 2 * scale), ("vm", None, 1.0), ("real", None, 1.0)):
        rv = [r for r in runs if r["profile"] == profile and r["batch"] == validation_batch
              and r["scale"] == (1.0 if k is None else k * own(r["system"]))]
        if rv:
            extra.append(compare_output(rv, profile=profile, scale=sc, accelerator=accelerator,
                                        source=f"{profile} S={sc:g} batch {validation_batch}"))
    first = outputs.get(validation_batch)
    v = validation(([first] if first else []) + extra)
    rep = [o for b, o in outputs.items()]
    by_sys = {}
    for o in rep:
        for s, x in o["systems"].items():
            sp = x.get("spread")
            by_sys[s] = max(by_sys.get(s, 0.0), sp) if sp is not None else by_sys.get(s)
    from lsm_gnn.bench.replicate import SPREAD_LIMIT
    from lsm_gnn.bench.validate import DILATION_LIMIT, EMULATOR_LIMIT

    d, e = v.get("dilation"), v.get("emulator_vs_real")
    # the pacing gate is the paper profile's (the runs whose figures the claims read); the emulator
    # check's `vm` runs at S = 1 have no slack by design: one whose pacing fell behind is left out of
    # that check, which names it with its cause (`left_out`)
    paper = [r for r in runs + at_f if r["profile"] == "paper"]
    late = [(x, part) for r in paper for part, x in
            ([("ssd", r["late_fraction"])] + sorted((r.get("parts_late") or {}).items())) if x is not None]
    worst = max(late, default=None)
    vm_out = {r["system"]: sorted(r["summary"].get("invalid_causes") or ["invalid"]) for r in runs
              if r["profile"] == "vm" and r["batch"] == validation_batch and r["summary"].get("valid") is False}
    out["validation"] = {
        "replication": {"met": bool(by_sys) and all(x is not None and x <= SPREAD_LIMIT for x in by_sys.values()),
                        "limit": SPREAD_LIMIT, "by_system": by_sys,
                        "runs_per_system": min((x["runs"] for b in out["batches"].values() for x in b["systems"].values()),
                                               default=0)},
        "dilation": {"met": None if d is None else bool(d["ok"]), "limit": DILATION_LIMIT, "scales": [scale, 2 * scale],
                     "scales_by_system": {s: [own(s), 2 * own(s)] for s in out["time_scale_by_system"]},
                     "batch": validation_batch, "by_system": None if d is None else d["difference"]},
        "emulator_vs_real": {"met": None if e is None else bool(e["ok"]), "limit": EMULATOR_LIMIT,
                             "batch": validation_batch, "by_system": None if e is None else e["error"],
                             "left_out": vm_out},
        # met when every run of the paper profile is valid: no part of it ended late by more than
        # the limit (the charger's verdict, lsm_gnn/storage/charge.py), the SSD's reads included
        "pacing": {"met": bool(paper) and all(r["summary"].get("valid") is not False for r in paper),
                   "limit": PACING_LIMIT,
                   "worst_late_fraction": None if worst is None else worst[0],
                   "worst_part": None if worst is None else worst[1],
                   "valid_runs": sum(1 for r in paper if r["summary"].get("valid") is not False),
                   "paper_runs": len(paper)},
    }
    big = str(max(batches))
    r_big = (out["batches"].get(big) or {}).get("distdgl_vs_lsm", {})
    # the claim's class at f = 0.5, 1 and 2 (bench validate's verdict): the matrix at the largest batch
    # (its f) and Dist-DGL's runs at the other f, LSM-GNN's epoch the same at every f
    base = outputs.get(int(big))
    verdict = None
    if base is not None and at_f:
        base = {**base, "host_speed": float(host_speed), "distdgl_vs_lsm_epoch": r_big.get("median"),
                "per_round_vs_lsm": {"distdgl": {"min": r_big.get("min"), "max": r_big.get("max")}}}
        more = []
        for f in sorted({r["host_speed"] for r in at_f}):
            rf = [r for r in at_f if r["host_speed"] == f and r["batch"] == int(big) and r["profile"] == "paper"]
            if rf:
                more.append({**compare_output(rf, profile="paper", scale=scale, accelerator=accelerator,
                                              source=f"paper S={'/'.join(f'{x:g}' for x in sorted({r['scale'] for r in rf}))} "
                                                     f"f={f:g} batch {big}"), "host_speed": f})
        verdict = validation([base, *more])["verdict"]
        if verdict:  # each f's Dist-DGL time scale (a run at f > 1 runs at S / f: testbed_host_speeds)
            scales = {f"{r['host_speed']:g}": r["scale"] for r in at_f if r["batch"] == int(big)}
            for f, x in verdict["by_host_speed"].items():
                x["distdgl_time_scale"] = scales.get(f, own("distdgl"))
    out["verdict_by_host_speed"] = verdict
    out["projection"] = projection_entry(projection, r_big, int(big))
    return out


def table_rows(summary: dict) -> list[dict]:
    rows = []
    for b, entry in summary["batches"].items():
        for s, x in entry["systems"].items():
            r = entry.get(f"{s}_vs_lsm") or {}
            rows.append({"batch": int(b), "system": s, "epoch_median_s": x["median_s"], "epoch_min_s": x["min_s"],
                         "epoch_max_s": x["max_s"], "spread": x["spread"], "runs": x["runs"], "valid_runs": x["valid_runs"],
                         "au": x["au"], "cpu_share": x["cpu_share"], "bound": x["bound"],
                         "late_fraction_max": x["late_fraction_max"], "vs_lsm_median": r.get("median"),
                         "vs_lsm_min": r.get("min"), "vs_lsm_max": r.get("max")})
    return rows


def figure(summary: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from figtools import SYSTEM_COLOURS, SYSTEM_NAMES, save_figure

    batches = list(summary["batches"])
    systems = [s for s in SYSTEM_ORDER if any(s in summary["batches"][b]["systems"] for b in batches)]
    fig, axes = plt.subplots(1, len(batches), figsize=(max(4.5 * len(batches), 7.0), 4), squeeze=False)
    for ax, b in zip(axes[0], batches):
        xs = summary["batches"][b]["systems"]
        names = [s for s in systems if s in xs]
        # a system without a valid run keeps its slot, empty and labelled (its figures are None)
        med = [xs[s]["median_s"] or 0.0 for s in names]
        err = [[m - (xs[s]["min_s"] or m) for s, m in zip(names, med)],
               [(xs[s]["max_s"] or m) - m for s, m in zip(names, med)]]
        # each system by its name and colour of every figure (figtools)
        ax.bar([SYSTEM_NAMES.get(s, s).replace(" ", "\n", 1) for s in names], med, yerr=err, capsize=4,
               color=[SYSTEM_COLOURS.get(s, "#333333") for s in names])
        for i, s in enumerate(names):
            if xs[s]["median_s"] is None:
                ax.text(i, 0, "no valid\nrun", ha="center", va="bottom", fontsize=8)
        ax.set_title(f"batch {b}")
        ax.set_xlabel("system")
        ax.set_ylabel("steady epoch (s, emulated time)")
    fig.suptitle(f"Emulated at scale {summary['time_scale']:g}, storage profile {summary['storage_profile']}, "
                 f"{summary['accelerator']}, {summary['devices']} devices\n(median, whiskers: min-max over runs)",
                 fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    save_figure(fig, path, dpi=120)
    plt.close(fig)


def _pct(x, spec="+.1f"):
    return "n/a" if x is None else format(100 * x, spec) + " %"


def _met(m):
    return "n/a (not run)" if m is None else ("met" if m else "NOT met")


def _delay_lines(summary: dict) -> list[str]:
    """The Dist-DGL ratios with the network delay a `rate` link left out added back."""
    out = []
    for b, entry in summary["batches"].items():
        r = entry.get("distdgl_vs_lsm") or {}
        if r.get("median_with_delay") is not None:
            out.append(f"- Dist-DGL's delay left out (rate-only link) at batch {b}: at most "
                       f"{r['missing_delay_epoch_s']:.3f} s per epoch; Dist-DGL / LSM-GNN with it added back "
                       f"{r['median_with_delay']:.3f}x [{r['min_with_delay']:.3f}, {r['max_with_delay']:.3f}] "
                       f"(measured {r['median']:.3f}x)")
    return out


def fragment(summary: dict, network: str) -> str:
    S = summary["time_scale"]
    v = summary["validation"]
    own = {s: x for s, x in (summary.get("time_scale_by_system") or {}).items() if x != S}
    own_text = ("; " + ", ".join(f"{s} at its own S = {x:g}" for s, x in sorted(own.items()))) if own else ""
    lines = [f"## Paper testbed, emulated at scale {S:g}{own_text} (storage profile `paper`, {summary['accelerator']})", "",
             f"Emulated, not measured on the paper's hardware: every system reads through the emulated `paper` "
             f"storage device (per device 2 SSDs of Samsung 980 Pro class) and trains on emulated "
             f"{summary['accelerator']} accelerators, on {summary['devices']} devices with "
             f"{100 * summary['memory_fraction']:g} % of the features per device for every system (Dist-DGL: 2 "
             f"emulated machines x 2 trainers, every row in RAM; its network {network}); every time is divided "
             f"back by its run's S (emulated time). Epochs are the steady epoch, median [min, max] over "
             f"the valid runs of {v['replication']['runs_per_system']} or more, each round a new seed (a run "
             f"whose storage pacing fell behind measured the machine, not the model: it is counted in "
             f"'valid runs' and left out of the figures).", "",
             "| batch | system | steady epoch s | spread | AU | CPU share | valid runs | bound | vs LSM-GNN [min, max] |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in table_rows(summary):
        vs = "" if r["vs_lsm_median"] is None else f"{r['vs_lsm_median']:.3f}x [{r['vs_lsm_min']:.3f}, {r['vs_lsm_max']:.3f}]"
        epoch = ("n/a (no valid run)" if r["epoch_median_s"] is None else
                 f"{r['epoch_median_s']:.3f} [{r['epoch_min_s']:.3f}, {r['epoch_max_s']:.3f}]")
        lines.append(f"| {r['batch']} | {r['system']} | {epoch} | {_pct(r['spread'], '.1f')} | {_pct(r['au'], '.1f')} | "
                     f"{'n/a' if r['cpu_share'] is None else format(r['cpu_share'], '.2f')} | {r['valid_runs']}/{r['runs']} | "
                     f"{r['bound']} | {vs} |")
    rep, d, e, p = v["replication"], v["dilation"], v["emulator_vs_real"], v["pacing"]
    pr = summary["projection"]
    lines += ["", "Validation:",
              f"- replication (spread <= {100 * rep['limit']:g} %): {_met(rep['met'])}; worst spread per system "
              + ", ".join(f"{s} {_pct(x, '.1f')}" for s, x in rep["by_system"].items()),
              f"- dilation invariance (each system at its S and 2 S: "
              + ", ".join(f"{s} {a:g}/{b:g}" for s, (a, b) in (d.get("scales_by_system") or {}).items())
              + f", batch {d['batch']}, within "
              f"{100 * d['limit']:g} %): {_met(d['met'])}"
              + ("" if not d["by_system"] else "; " + ", ".join(f"{s} {_pct(x)}" for s, x in d["by_system"].items())),
              f"- emulator vs real disk (`vm` profile at S = 1, batch {e['batch']}, within {100 * e['limit']:g} %): "
              f"{_met(e['met'])}" + ("" if not e["by_system"] else "; " + ", ".join(f"{s} {_pct(x)}" for s, x in e["by_system"].items()))
              + ("" if not e.get("left_out") else "; `vm` runs left out (their pacing fell behind at S = 1): "
                 + ", ".join(f"{s} ({'; '.join(c.split(' (')[0] for c in cs)})" for s, cs in e["left_out"].items())),
              f"- pacing (every part of every run of the `paper` profile late by < {100 * p['limit']:g} % of its "
              f"charged time): {_met(p['met'])}; the latest part {_pct(p['worst_late_fraction'], '.2f')}"
              f"{'' if p.get('worst_part') is None else ' (' + p['worst_part'] + ')'}, {p['valid_runs']} of "
              f"{p['paper_runs']} runs valid",
              *_delay_lines(summary),
              "", f"Dist-DGL / LSM-GNN at batch {pr['batch']}: measured "
              f"{'n/a' if pr['measured'] is None else format(pr['measured'], '.3f') + 'x'}, projected on the "
              f"`{pr['hardware']}` profile with the machine each run's emulation had (the SSD model, this core "
              f"now x f, Dist-DGL's own host charges: `lsm-gnn bench validate`) "
              f"{'n/a' if pr['distdgl_vs_lsm'] is None else format(pr['distdgl_vs_lsm'], '.3f') + 'x'}"
              f" (relative error {_pct(pr['relative_error'])}; each system's projected epoch against its emulated one: "
              + (", ".join(f"{s} {_pct(x)}" for s, x in (pr.get("by_system") or {}).items()) or "n/a")
              + f"; target: each within {100 * pr['limit']:g} %: {_met(pr['met'])}).", ""]
    vf = summary.get("verdict_by_host_speed")
    if vf:
        lines[-1:-1] = [f"- the claim's class by f, the paper's host core's time over this machine's (Dist-DGL / LSM-GNN "
                        f"at batch {pr['batch']}, median [min, max]): "
                        + "; ".join(f"f = {f} (Dist-DGL at S = {v['distdgl_time_scale']:g}): "
                                    + ("n/a" if v["ratio"] is None else
                                       f"{v['ratio']:.2f}x [{v['min']:.2f}, {v['max']:.2f}] ({v['class']})")
                                    for f, v in vf["by_host_speed"].items())
                        + (f"; decided: {vf['class']}" if vf["decided"] else
                           "; not decided (" + (f"f = {', '.join(f'{m:g}' for m in vf['missing'])} not run"
                                                if vf["missing"] else "no ratio from valid runs at some f"
                                                if any(v["ratio"] is None for v in vf["by_host_speed"].values())
                                                else "the classes differ") + ")")]
    return "\n".join(lines)


def main(sm) -> None:
    import pandas as pd

    from lsm_gnn.utils.atomic import write_json, write_text
    from wfcommon import log_to

    log_to(sm)
    runs = load_runs(sm.input.runs)
    projection = json.loads(Path(sm.input.projection).read_text()) if sm.input.projection else None
    summary = summarise(runs, projection, scale=float(sm.params.time_scale),
                        system_scales={k: float(v) for k, v in dict(sm.params.system_scales).items()},
                        host_speed=float(sm.params.host_speed),
                        accelerator=sm.params.accelerator,
                        devices=int(sm.params.devices), fraction=float(sm.params.fraction),
                        dataset=sm.params.dataset["name"], batches=[int(b) for b in sm.params.batches],
                        validation_batch=int(sm.params.validation_batch))
    # the verdict on (a) counts the Dist-DGL ratio only over a shaped network (verdicts.claim_a_emulated)
    summary["network_emulation"] = network_mode(runs, "charged")
    write_json(sm.output.summary, summary)
    write_text(sm.output.table, pd.DataFrame(table_rows(summary)).to_csv(index=False))
    figure(summary, Path(sm.output.figure))
    write_text(sm.output.fragment, fragment(summary, NETWORK_WORDS.get(summary["network_emulation"],
                                                                       summary["network_emulation"])))
    print(json.dumps(summary["validation"], indent=1))


try:
    sm_ = snakemake  # noqa: F821 (Snakemake's script preamble defines it)
except NameError:  # imported (the tests)
    sm_ = None
if sm_ is not None:
    main(sm_)
