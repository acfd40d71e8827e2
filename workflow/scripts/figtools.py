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
    """Write `fig` atomically as PNG, after checking that every drawn axis is labelled. The page is
    grown to every artist (bbox_inches="tight") unless `kw` says otherwise, so that no label or
    legend placed outside the axes is cut by the figure's edge."""
    kw.setdefault("bbox_inches", "tight")
    bad = unlabelled_axes(fig)
    if bad:
        raise ValueError(f"figure {path}: " + "; ".join(bad))
    with atomic_path(path, suffix=".png") as tmp:
        fig.savefig(tmp, dpi=dpi, format="png", **kw)


# ---- names and colours: one mapping for every figure --------------------------------------------
# A system or a policy has the same name and the same colour in every figure of the report (issue 45:
# `lsm d2 c0.1` read as a code, and one colour meant two things across the PVP figure's panels).
SYSTEM_NAMES = {"lsm": "LSM-GNN", "isolated": "isolated caches", "mmap": "mmap", "direct": "O_DIRECT",
                "memory": "in-memory ideal", "distdgl": "Dist-DGL"}
SYSTEM_COLOURS = {"lsm": "#1f77b4", "isolated": "#ff7f0e", "mmap": "#8c564b", "direct": "#7f7f7f",
                  "memory": "#2ca02c", "distdgl": "#9467bd"}
POLICY_COLOURS = {"hybrid": "#d62728", "static": "#ff7f0e", "dynamic": "#2ca02c", "lru": "#9467bd",
                  "sieve": "#8c564b", "round_robin": "#1f77b4", "horizon": "#e377c2", "MIN": "black"}
# the stages of an iteration keep tab10's order (the order of STAGE_NAMES)
STAGE_COLOURS = dict(zip(STAGE_NAMES, ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
                                       "#e377c2", "#7f7f7f", "#bcbd22"]))
# a projection (not a measurement) is hatched in every figure that draws one
PROJECTED_HATCH = "//"


def display_name(label: str) -> str:
    """A run label of the report's tables (`lsm d2 c0.1`, `distdgl 2x2`, `memory d2`) as a reader
    reads it: 'LSM-GNN, 2 devices, 10 % memory', 'Dist-DGL, 2 machines x 2 trainers'."""
    parts = str(label).split()
    if not parts or parts[0] not in SYSTEM_NAMES:
        return str(label)
    out = [SYSTEM_NAMES[parts[0]]]
    for p in parts[1:]:
        if p.startswith("d") and p[1:].isdigit():
            out.append(f"{p[1:]} device{'s' if p[1:] != '1' else ''}")
        elif p.startswith("c"):
            try:
                out.append(f"{100 * float(p[1:]):g} % memory")
            except ValueError:
                out.append(p)
        elif "x" in p and parts[0] == "distdgl":
            m, t = p.split("x", 1)
            out.append(f"{m} machines x {t} trainers")
        else:
            out.append(p)
    return ", ".join(out)


def system_colour(label: str) -> str:
    return SYSTEM_COLOURS.get(str(label).split()[0] if str(label).split() else "", "#333333")


# ---- the layout check: no legend over the data, no text cut by the figure's edge ----------------
def _drawn_ticklabels(ax):
    out = []
    for axis in (ax.xaxis, ax.yaxis):
        for tick in axis._update_ticks():          # the ticks the axis draws (inside the view limits)
            out += [lab for lab in (tick.label1, tick.label2) if lab.get_visible() and lab.get_text().strip()]
    return out


def _data_points(ax, renderer):
    """Display coordinates of what `ax` plots: line vertices (with points between them, so that a
    segment crossing a box is seen), scatter points, error-bar segments; and the boxes of bars and
    images."""
    import matplotlib.collections as mc
    import matplotlib.patches as mp

    pts, boxes = [], []
    for line in ax.lines:
        if not line.get_visible() or len(line.get_xydata()) == 0:
            continue
        xy = line.get_transform().transform(np.asarray(line.get_xydata(), dtype=float))
        xy = xy[np.isfinite(xy).all(axis=1)]
        if line.get_linestyle() not in ("None", "none", "", " ") and len(xy) > 1:
            t = np.linspace(0, 1, 25)[:, None]
            xy = np.vstack([a + t * (b - a) for a, b in zip(xy[:-1], xy[1:])])
        pts.append(xy)
    for c in ax.collections:
        if not c.get_visible():
            continue
        if isinstance(c, mc.LineCollection):
            for seg in c.get_segments():
                if len(seg) > 1:
                    xy = c.get_transform().transform(np.asarray(seg, dtype=float))
                    t = np.linspace(0, 1, 25)[:, None]
                    pts.append(np.vstack([a + t * (b - a) for a, b in zip(xy[:-1], xy[1:])]))
        elif isinstance(c, mc.PathCollection) and len(c.get_offsets()):
            pts.append(c.get_offset_transform().transform(np.asarray(c.get_offsets(), dtype=float)))
        elif isinstance(c, mc.PolyCollection):     # fill_between, hexbin: the drawn area
            boxes.append(c.get_window_extent(renderer))
    for p in ax.patches:
        if p.get_visible() and isinstance(p, mp.Rectangle) and p.get_width() and p.get_height() \
                and p.get_transform().contains_branch(ax.transData):
            boxes.append(p.get_window_extent(renderer))
    for im in ax.images:
        if im.get_visible():
            boxes.append(im.get_window_extent(renderer))
    pts = np.vstack(pts) if pts else np.empty((0, 2))
    return pts[np.isfinite(pts).all(axis=1)], boxes


def layout_problems(fig, *, tight: bool = False) -> list[str]:
    """What keeps `fig` from reading at a glance, by the renderer's extents in display pixels:
    a legend whose box holds a plotted point, crosses a line or overlaps a bar or image of any axes,
    neighbouring tick labels written over one another, and a text (tick label, axis label, title,
    note, legend entry) cut by the figure's edge.
    `tight`: the figure is saved with bbox_inches="tight", which grows the page to every artist, so
    nothing is cut; legends are still checked."""
    import matplotlib.text as mt

    if not hasattr(fig.canvas, "get_renderer"):   # a figure pyplot closed: give it a raster canvas again
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        FigureCanvasAgg(fig)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    out = []
    axes = [a for a in fig.axes if a.get_visible() and a.axison]
    legends = [(a, a.get_legend()) for a in axes if a.get_legend() is not None] + [(None, lg) for lg in fig.legends]
    data = {id(a): _data_points(a, renderer) for a in axes}
    for owner, lg in legends:
        if not lg.get_visible():
            continue
        box = lg.get_window_extent(renderer).padded(-1.0)
        for a in axes:
            pts, boxes = data[id(a)]
            clip = a.bbox                         # only what the axes shows counts
            inside = (pts[:, 0] >= max(box.x0, clip.x0)) & (pts[:, 0] <= min(box.x1, clip.x1)) \
                & (pts[:, 1] >= max(box.y0, clip.y0)) & (pts[:, 1] <= min(box.y1, clip.y1))
            hit = bool(inside.any())
            if not hit:
                for b in boxes:
                    b = b.intersection(b, clip) if b.overlaps(clip) else None
                    if b is not None and b.overlaps(box):
                        hit = True
                        break
            if hit:
                title = a.get_title() or a.get_ylabel() or "untitled"
                out.append(f"legend of {'the figure' if owner is None else repr(owner.get_title() or owner.get_ylabel())} "
                           f"over the data of axes {title!r}")
    for a in axes:                                 # tick labels written over one another
        for axis in (a.xaxis, a.yaxis):
            # a slanted label's box is not its outline: only level or upright labels are compared
            boxes = [(t.get_text(), t.get_window_extent(renderer).padded(-1.0)) for t in
                     (tick.label1 for tick in axis._update_ticks())
                     if t.get_visible() and t.get_text().strip() and t.get_rotation() % 90 == 0]
            for (t1, b1), (t2, b2) in zip(boxes, boxes[1:]):
                if b1.overlaps(b2):
                    out.append(f"tick labels {t1[:30]!r} and {t2[:30]!r} overlap")
    if not tight:
        page = fig.bbox.padded(1.0)
        ticks = set()
        for a in fig.axes:
            for axis in (a.xaxis, a.yaxis):
                for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                    ticks.update({id(tick.label1), id(tick.label2)})
        texts = [t for t in fig.findobj(mt.Text) if id(t) not in ticks]
        texts += [t for a in fig.axes if a.get_visible() for t in _drawn_ticklabels(a)]
        for t in texts:
            if not t.get_visible() or not t.get_text().strip() or (t.axes is not None and not t.axes.get_visible()):
                continue
            ext = t.get_window_extent(renderer)
            if ext.x0 < page.x0 or ext.y0 < page.y0 or ext.x1 > page.x1 or ext.y1 > page.y1:
                out.append(f"text {t.get_text()[:60]!r} clipped by the figure's edge")
    return out
