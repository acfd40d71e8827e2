"""What every figure of the report shares: the stage names (one set, in every figure and table),
min-max error bars over repeated runs, and the check that every drawn axis is labelled (with its
unit) before a figure is written.

A figure whose axes lack a label is refused (`save_figure` raises): the report's figures are meant
to be printed as they are (issue: every axis labelled with units, error bars on every timed figure).
"""

from __future__ import annotations

import numpy as np

from lsm_gnn.utils.atomic import atomic_path

# the stages of an iteration (lsm_gnn.metrics.STAGES) as every figure and table names them
STAGE_NAMES = {"sample": "sample", "exchange_ids": "exchange ids", "fetch_cache": "fetch (cache)",
               "fetch_victim": "fetch (victim)", "fetch_storage": "fetch (storage)",
               "exchange_rows": "exchange rows / KVStore pull", "train": "train",
               "sync": "gradient sync (waiting for peers)", "other": "other"}


def minmax_errorbars(ax, positions, median, lo, hi, *, horizontal: bool = True, label: str | None = "min-max of the runs"):
    """Error bars from each value's min to its max over the runs, centred on the median (drawn on
    top of bars at `positions`); values without a min or max get none."""
    med, lo, hi = (np.asarray(x, dtype=float) for x in (median, lo, hi))
    ok = ~(np.isnan(med) | np.isnan(lo) | np.isnan(hi))
    err = np.vstack([np.clip(med - lo, 0, None), np.clip(hi - med, 0, None)])[:, ok]
    pos = np.asarray(positions, dtype=float)[ok]
    kw = dict(fmt="none", ecolor="black", elinewidth=1.2, capsize=4, zorder=6, label=label)
    return ax.errorbar(med[ok], pos, xerr=err, **kw) if horizontal else ax.errorbar(pos, med[ok], yerr=err, **kw)


def unlabelled_axes(fig) -> list[str]:
    """The drawn axes of `fig` (not colour bars, not hidden, not text-only) that lack an x or y label."""
    out = []
    for i, ax in enumerate(fig.axes):
        if not ax.get_visible() or ax.get_label() == "<colorbar>" or not ax.axison:
            continue
        if not (ax.lines or ax.patches or ax.collections or ax.images):
            continue  # a panel holding only a note
        missing = [n for n, t in (("x", ax.get_xlabel()), ("y", ax.get_ylabel())) if not t.strip()]
        if missing:
            out.append(f"axes {i} ({ax.get_title() or 'untitled'}): no {' or '.join(missing)} label")
    return out


def save_figure(fig, path, dpi: int = 120, **kw) -> None:
    """Write `fig` atomically as PNG, after checking that every drawn axis is labelled."""
    bad = unlabelled_axes(fig)
    if bad:
        raise ValueError(f"figure {path}: " + "; ".join(bad))
    with atomic_path(path, suffix=".png") as tmp:
        fig.savefig(tmp, dpi=dpi, format="png", **kw)
