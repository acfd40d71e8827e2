"""The GPU calls' results as one figure: every folder of reports/gpu/ (what `tools/gpu-check.sh`
brought back, reports/gpu/README.md) read from its gpu_check.json: each target's measured value
beside its target, met or missed, and the GPU tests that passed, failed or were skipped, per call.

Not a rule of the workflow (the calls are made on a lent GPU machine, not by a reproduction):
    python workflow/scripts/gpu_report.py                 # reports/gpu/ -> reports/gpu/gpu_calls.png
    python workflow/scripts/gpu_report.py DIR --out PNG
`make gpu-figure` runs the first. The numbers are the JSON's, unchanged; a call without a target
or test count leaves its bar out.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from figtools import save_figure  # noqa: E402

# what each target of `lsm-gnn check gpu` measures, as the figure names it (lsm_gnn/check/gpu.py)
TARGET_NAMES = {"gpu_vs_cpu_requests_ratio": "cache engine: GPU / CPU requests per second",
                "gpu_gather_vs_copy_bw": "row gather / plain copy bandwidth on the GPU",
                "steady_epoch_vs_memory": "LSM-GNN steady epoch / in-memory ideal"}
MET, MISSED = "#2ca02c", "#d62728"


def load_calls(root: Path) -> list[tuple[str, dict]]:
    """(folder name, gpu_check.json) for every call under `root`, by name."""
    calls = []
    for p in sorted(root.glob("*/gpu_check.json")):
        try:
            calls.append((p.parent.name, json.loads(p.read_text())))
        except ValueError as e:
            raise ValueError(f"{p}: not a JSON document ({e}); expected what `lsm-gnn check gpu` writes") from e
    if not calls:
        raise FileNotFoundError(f"{root}: no */gpu_check.json (one folder per GPU call, reports/gpu/README.md)")
    return calls


def figure(calls: list[tuple[str, dict]], out: Path) -> None:
    targets = list(dict.fromkeys(k for _, c in calls for k in (c.get("targets") or {})))
    fig, axes = plt.subplots(1, len(targets) + 1, figsize=(3.6 * (len(targets) + 1), 4.2), squeeze=False)
    names = [n for n, _ in calls]
    for ax, key in zip(axes[0], targets):
        vals, cols, goal, op = [], [], None, None
        for _, c in calls:
            t = (c.get("targets") or {}).get(key) or {}
            vals.append(t.get("value"))
            cols.append(MET if t.get("met") else MISSED)
            goal, op = t.get("target", goal), t.get("op", op)
        xs = [i for i, v in enumerate(vals) if v is not None]
        ax.bar(xs, [vals[i] for i in xs], color=[cols[i] for i in xs])
        for i in xs:
            ax.annotate(f"{vals[i]:.3g}x", (i, vals[i]), xytext=(0, 2), textcoords="offset points", ha="center",
                        fontsize=8)
        if goal is not None:                  # the target: a dashed line, its value in the title (off the bars)
            ax.axhline(goal, color="black", ls="--", lw=1)
        top = max([v for v in vals if v is not None] + [goal or 0])
        if top / max(min([v for v in vals if v] + [goal or top]), 1e-12) > 20:
            ax.set_yscale("log")              # a ratio spanning decades: equal steps are equal factors
        ax.set_ylim(top=top * (3 if ax.get_yscale() == "log" else 1.18))
        ax.set_xticks(range(len(names)), [n.replace("2026-", "").replace("-h", "\nh", 1) for n in names])
        ax.set_title(TARGET_NAMES.get(key, key) + (f"\n(target, dashed: {op} {goal:g})" if goal is not None else ""),
                     fontsize=9)
        ax.set_xlabel("GPU call (folder of reports/gpu)")
        ax.set_ylabel("measured (ratio, x)")
    ax = axes[0][-1]
    parts = (("passed", MET), ("failed", MISSED), ("skipped", "#bbbbbb"))
    bottom = [0] * len(calls)
    for key, colour in parts:
        v = [int(((c.get("tests") or {}).get("counts") or {}).get(key) or 0) for _, c in calls]
        ax.bar(range(len(calls)), v, bottom=bottom, color=colour, label=key)
        bottom = [b + x for b, x in zip(bottom, v)]
    ax.set_xticks(range(len(names)), [n.replace("2026-", "").replace("-h", "\nh", 1) for n in names])
    ax.set_title("GPU tests (pytest -m gpu)", fontsize=9)
    ax.set_xlabel("GPU call (folder of reports/gpu)")
    ax.set_ylabel("tests (count)")
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.45), ncol=3, frameon=False)
    fig.suptitle("Measured on a lent GPU (lsm-gnn check gpu): each call's targets (green: met, red: missed) and tests",
                 fontsize=10)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    save_figure(fig, out, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("root", nargs="?", default="reports/gpu", help="folder of the GPU calls (default reports/gpu)")
    ap.add_argument("--out", default=None, help="the PNG (default ROOT/gpu_calls.png)")
    a = ap.parse_args(argv)
    root = Path(a.root)
    out = Path(a.out) if a.out else root / "gpu_calls.png"
    figure(load_calls(root), out)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
