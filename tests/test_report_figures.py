"""The report's figure helpers (workflow/scripts/figtools.py) and what the report scripts draw with
them: min-max error bars over the runs, every axis labelled; and the inputs of the verdicts on
claims (c) and (d) that the report scripts build (workflow/scripts/figures_report.py, pvp_report.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow/scripts"))
import baselines_report  # noqa: E402
import figtools  # noqa: E402
import figures_report  # noqa: E402
import pvp_report  # noqa: E402
import verdicts as V  # noqa: E402

from lsm_gnn.metrics import STAGES  # noqa: E402


def test_min_max_error_bars_span_each_values_runs_and_skip_missing_ones():
    fig, ax = plt.subplots()
    ax.barh([0, 1, 2], [10.0, 20.0, 5.0])
    bars = figtools.minmax_errorbars(ax, [0, 1, 2], [10.0, 20.0, 5.0], [8.0, 19.0, np.nan], [13.0, 25.0, np.nan])
    segs = bars.lines[2][0].get_segments()        # one horizontal segment per value with a min and a max
    assert [tuple(map(tuple, s)) for s in segs] == [((8.0, 0.0), (13.0, 0.0)), ((19.0, 1.0), (25.0, 1.0))]
    plt.close(fig)


def test_a_figure_with_an_unlabelled_axis_is_refused_and_a_note_panel_is_not(tmp_path):
    fig, (a, b, c) = plt.subplots(1, 3)
    a.plot([0, 1], [0, 1])
    a.set_xlabel("memory per device (%)")
    b.plot([0, 1], [1, 0])
    b.set_xlabel("x (s)")
    b.set_ylabel("y (rows)")
    c.text(0.5, 0.5, "not drawn: no data")        # only a note: needs no labels
    assert figtools.unlabelled_axes(fig) == ["axes 0 (untitled): no y label"]
    with pytest.raises(ValueError, match="no y label"):
        figtools.save_figure(fig, tmp_path / "f.png")
    assert not (tmp_path / "f.png").exists()
    a.set_ylabel("storage rows (count)")
    figtools.save_figure(fig, tmp_path / "f.png")
    assert (tmp_path / "f.png").stat().st_size > 0
    plt.close(fig)


def baseline_rows(seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for i, (label, system) in enumerate([("lsm d2 c0.1", "lsm"), ("distdgl 2x2", "distdgl")]):
        med = 100.0 + 50 * i
        row = {"label": label, "system": system, "accelerator": "a100", "runs": 5, "epoch_steady_s": med,
               "steady_min": med - 7.0, "steady_max": med + 11.0, "preprocessing_s": 3.0, "startup_s": 1.0,
               "epoch_cold_s": med + 5, "first_epoch_s": med + 9, "first_epoch_min": med + 2,
               "first_epoch_max": med + 20, "storage_bytes": 1e9 * (1 - i)}
        share = rng.dirichlet(np.ones(len(STAGES)))
        row.update({f"stage_{k}": med * s for k, s in zip(STAGES, share)})
        rows.append(row)
    return pd.DataFrame(rows)


def test_the_baseline_figures_draw_min_max_bars_and_label_every_axis(tmp_path, monkeypatch):
    saved = {}

    def keep(fig, path, dpi=120, **kw):
        assert not figtools.unlabelled_axes(fig)
        saved[Path(path).name] = fig

    monkeypatch.setattr(baselines_report, "save_figure", keep)
    monkeypatch.setattr(baselines_report.plt, "close", lambda *a: None)
    baselines_report.figures(baseline_rows(), {k: tmp_path / f"{k}.png" for k in ("epoch", "first", "storage")})
    ax = saved["epoch.png"].axes[0]
    segs = [s for c in ax.collections for s in getattr(c, "get_segments", lambda: [])()]
    assert sorted((s[0][0], s[1][0]) for s in segs) == [(93.0, 111.0), (143.0, 161.0)]
    assert "min-max" in " ".join(t.get_text() for t in ax.get_legend().get_texts())
    assert set(t.get_text() for t in ax.get_legend().get_texts()) >= {figtools.STAGE_NAMES["fetch_storage"]}
    first = saved["first.png"].axes[0]
    assert sorted((s[0][0], s[1][0]) for c in first.collections for s in getattr(c, "get_segments", lambda: [])()) \
        == [(102.0, 120.0), (152.0, 170.0)]
    plt.close("all")


def test_claim_c_is_decided_on_the_no_buffer_replays_of_hybrid_static_and_dynamic():
    pts = []
    for b, w, rows in [(128, 8, {"hybrid": 1.249, "static": 1.293, "dynamic": 1.553}),
                       (1024, 8, {"hybrid": 1.125, "static": 1.265, "dynamic": 1.098}),
                       (128, 4, {"hybrid": 1.27, "static": 1.293, "dynamic": 1.646})]:
        for p, r in rows.items():
            pts.append({"batch": b, "window": w, "policy": p, "buffer": False, "storage_rows_vs_min": r,
                        V_KEY: 16.1 if b == 128 else 2.3})
    # with the buffer hybrid reads the most: ignored by (c)
    pts.append({"batch": 128, "window": 8, "policy": "hybrid", "buffer": True, "storage_rows_vs_min": 2.005, V_KEY: 14.5})
    got = figures_report.no_buffer_points({"points": pts}, 128)
    assert [p["label"] for p in got] == ["batch 128, W = 8 (headline)", "batch 128, W = 4", "batch 1024, W = 8"]
    assert got[0]["hybrid"] == 1.249
    v = V.claim_c(got)
    assert v["verdict"] == V.PARTLY and v["wins"] == 2 and "not at batch 1024, W = 8 (2.3)" in v["why"]


V_KEY = figures_report.RATIO_KEY


def test_the_authors_configuration_is_compared_with_the_same_cache_without_the_buffer():
    df = pd.DataFrame([
        {"policy": "hybrid", "batch": 128, "window": 8, "buffer": False, "setting": "equal memory", "storage_rows": 1000,
         "victim_depth": 0, "capacity_rows": 9001, "victim_capacity": 0, "spill_attempts_per_iteration": 0.0,
         "spill_dropped_per_iteration": 0.0},
        {"policy": "hybrid", "batch": 128, "window": 8, "buffer": True, "setting": "equal memory", "storage_rows": 1300,
         "victim_depth": 100, "capacity_rows": 8101, "victim_capacity": 900, "spill_attempts_per_iteration": 50.0,
         "spill_dropped_per_iteration": 20.0},
        {"policy": "hybrid", "batch": 128, "window": 8, "buffer": True, "setting": "authors", "storage_rows": 800,
         "victim_depth": 32768, "capacity_rows": 9001, "victim_capacity": 294912,
         "spill_attempts_per_iteration": 50.0, "spill_dropped_per_iteration": 0.0}])
    t = pvp_report.authors_table(df)
    assert len(t) == 1 and t.storage_rows_without.iloc[0] == 1000 and t.with_over_without.iloc[0] == 0.8
    assert t.pays.iloc[0] and t.extra_host_rows.iloc[0] == 294912
    # the equal-memory table never sees the authors' point
    pays = pvp_report.pays_table(df.assign(cache_fraction=0.1, host_share=0.1, depth_per_spill=2.0), 0.1)
    assert list(pays.storage_rows) == [1300]
