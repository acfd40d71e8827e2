"""Every report figure reads at a glance (issue 45, item 4): each report script of the workflow is run
as Snakemake runs it (its `snakemake` object) on the inputs of its unit test (.tests/unit/<rule>/data,
the 2,000-node unit-test run), every figure it saves is kept, and figtools.layout_problems must find
no legend over plotted data and no text cut by the figure's edge. A deliberately bad figure shows
that the check can fail."""

from __future__ import annotations

import json
import runpy
import sys
from pathlib import Path
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = REPO / "workflow" / "scripts"
UNIT = REPO / ".tests" / "unit"
TAG = "synthetic-2000-d8"
sys.path.insert(0, str(SCRIPTS))
import figtools  # noqa: E402

# the unit-test run's settings (.tests/config/unit.yaml) that the report rules pass as params
UNIT_CONFIG = {"batch": 16, "paper_batch": 32, "fanouts": "5,5", "fraction": 0.2, "windows": [4], "seed": 0,
               "regime_seeds": 64, "pvp_shares": [0.2], "pvp_windows": [8], "pvp_batches": [16, 32],
               "accelerator": "a100"}


def dataset_info(data: Path, tag: str) -> dict:
    return {"kind": "synthetic", "name": tag.rsplit("-d", 1)[0], "tag": tag, "data": str(data), "size": "2000",
            "hetero": False, "dim": 8}


def jobs(res: Path, data: Path, tag: str, out: Path, cfg: dict = UNIT_CONFIG) -> dict[str, SimpleNamespace]:
    """Each report script's `snakemake` object (input, output, params as its rule in workflow/rules
    gives them) over results in `res`, the prepared dataset `data`, writing under `out`."""
    ds = dataset_info(data, tag)
    o = lambda *names: SimpleNamespace(**{n: str(out / f"{n}.{'png' if n.endswith(('figure', 'fig')) or n in ('epoch', 'first', 'storage', 'degree', 'pagerank') else 'out'}") for n in names})  # noqa: E731
    g = lambda pattern: sorted(str(p) for p in res.glob(pattern))  # noqa: E731
    ns = SimpleNamespace
    return {
        "storage_report": ns(input=[str(res / "storage/bench.json")], output=o("fragment", "figure"), log=[], params=ns()),
        "cache_report": ns(
            input=ns(sweeps=g("cache/sweep-W*.csv"), multi=g("cache/multidevice-g2-*.csv"),
                     scaling=g("cache/multidevice-g*-*.csv"), regime=g("cache/regime-b*.csv"),
                     hetero=g("cache/hetero.csv"), hetero_json=g("cache/hetero.json"), pvp=g("cache/pvp-b*.csv")),
            output=o("fragment", "figure", "scaling_figure", "regime_figure", "no_buffer_figure", "table", "regime"),
            log=[], params=ns(dataset=ds, hetero=({"kind": "synthetic", "name": "synthetic-hetero-small", "tag": "synthetic-hetero-small",
                                                "size": "small", "hetero": True} if g("cache/hetero.csv") else None),
                              batch=cfg["batch"], fanouts=cfg["fanouts"],
                              fraction=cfg["fraction"], windows=cfg["windows"], regime_seeds=cfg["regime_seeds"])),
        "pvp_report": ns(input=ns(csvs=g("cache/pvp-b*.csv")), output=o("fragment", "figure", "summary"), log=[],
                         params=ns(dataset=ds, fraction=cfg["fraction"], shares=cfg["pvp_shares"],
                                   windows=cfg["pvp_windows"], batches=cfg["pvp_batches"], config_share=0.1)),
        "train_report": ns(input=ns(records=g("train/*-r*.json")), output=o("table", "time_fig", "acc_fig", "fragment"),
                           log=[], params=ns(dataset=ds, data=str(data), seed=cfg["seed"])),
        "multidevice_report": ns(input=ns(bench=str(res / "multidevice/bench.json"),
                                          baselines=str(res / "baselines/summary.csv")),
                                 output=o("fragment", "figure"), log=[],
                                 params=ns(dataset=ds, data=str(data), cache=cfg["fraction"],
                                           accelerator=cfg["accelerator"])),
        "baselines_report": ns(input=ns(runs=g("baselines/*-r*.json")),
                               output=o("table", "ratios", "fragment", "epoch", "first", "storage"), log=[],
                               params=ns(dataset=ds, data=str(data), accelerator=cfg["accelerator"], warmup=1,
                                         timed=2, fraction=cfg["fraction"], distdgl=False)),
        "projection_report": ns(input=ns(validate=str(res / "projection/validate-this-machine.json"),
                                         paper=str(res / "projection/paper.json"),
                                         runs=g(f"baselines/*-{cfg['accelerator']}-r*.json"),
                                         pvp=str(res / "cache/pvp.json")),
                                output=o("fragment", "figure", "grid", "paper_range"), log=[],
                                params=ns(batch=cfg["batch"], paper_batch=cfg["paper_batch"])),
        "dataset_report": ns(input=ns(data=[str(data / "metadata.json")], verify=str(res / "dataset/verify.txt"),
                                      benchmarks=g("dataset/*.benchmark.tsv")),
                             output=o("stats", "degree", "pagerank", "fragment"), log=[],
                             params=ns(data=str(data), dataset=ds, seed=cfg["seed"], base_url=None)),
    }


def unit_job(rule: str, out: Path) -> SimpleNamespace:
    root = UNIT / rule / "data"
    return jobs(root / "results" / TAG, root / "data" / TAG, TAG, out)[rule]


def render(script: str, sm, monkeypatch) -> dict[str, tuple[object, bool]]:
    """Run one report script as Snakemake does and return the figures it saved, by file name, still
    open, each with whether it was saved with bbox_inches="tight" (the page grown to every artist)."""
    saved = {}
    real = figtools.save_figure

    def keep(fig, path, dpi=120, **kw):
        real(fig, path, dpi=dpi, **kw)
        saved[Path(path).name] = (fig, kw.get("bbox_inches", "tight") == "tight")  # save_figure's default

    monkeypatch.setattr(figtools, "save_figure", keep)
    monkeypatch.setattr(plt, "close", lambda *a, **k: None)
    for name in list(sys.modules):            # a script imported by another test keeps its own save_figure
        if name == script:
            del sys.modules[name]
    runpy.run_path(str(SCRIPTS / f"{script}.py"), init_globals={"snakemake": sm}, run_name="__main__")
    return saved


RULES = ["storage_report", "cache_report", "pvp_report", "train_report", "multidevice_report", "baselines_report",
         "projection_report", "dataset_report"]


@pytest.mark.parametrize("rule", RULES)
def test_a_report_figure_has_no_legend_over_its_data_and_no_clipped_label(rule, tmp_path, monkeypatch):
    sm = unit_job(rule, tmp_path)
    if rule == "cache_report":               # the PVP replays the no-buffer figure reads sit beside the sweep
        sm.input.pvp = [str(p) for p in sorted((UNIT / "pvp_report/data/results" / TAG / "cache").glob("pvp-b*.csv"))]
    if rule in ("train_report", "baselines_report", "multidevice_report", "projection_report"):
        pytest.importorskip("torch")
    saved = render(rule, sm, monkeypatch)
    assert saved, f"{rule} saved no figure through figtools.save_figure"
    problems = {name: figtools.layout_problems(fig, tight=tight) for name, (fig, tight) in saved.items()}
    assert not {k: v for k, v in problems.items() if v}
    plt.close("all")


def test_the_baseline_figures_keep_a_short_bar_readable_beside_a_long_one(tmp_path, monkeypatch):
    from test_report_figures import baseline_rows

    import baselines_report

    df = baseline_rows()
    df.loc[0, "epoch_steady_s"] = 6.0                 # a 6 s bar beside a 150 s one
    saved = {}
    monkeypatch.setattr(baselines_report, "save_figure", lambda fig, path, **kw: saved.__setitem__(Path(path).name, fig))
    baselines_report.figures(df, {k: tmp_path / f"{k}.png" for k in ("epoch", "first", "storage")})
    for name, fig in saved.items():
        assert not figtools.layout_problems(fig, tight=True), name   # saved as save_figure saves: tight
    labels = [t.get_text() for t in saved["epoch.png"].axes[0].get_yticklabels()]
    assert "LSM-GNN (2 devices, 10 % memory)" in labels or any(lab.startswith("LSM-GNN") for lab in labels)
    texts = " ".join(t.get_text() for t in saved["epoch.png"].axes[0].texts)
    assert "6.0 s" in texts                           # the short bar's value is written beside it
    plt.close("all")


def test_a_legend_drawn_over_the_data_and_a_label_cut_by_the_edge_are_found():
    fig, ax = plt.subplots(figsize=(4, 3))
    x = np.linspace(0, 1, 50)
    ax.plot(x, 0.5 + 0.0 * x, label="flat line through the middle")
    ax.legend(loc="center")                           # right over the line
    ax.set_xlabel("x (s)")
    ax.set_ylabel("y (rows)")
    assert any("legend" in p for p in figtools.layout_problems(fig))

    fig2, ax2 = plt.subplots(figsize=(3, 2))
    ax2.bar([0, 1], [1, 2])
    ax2.set_xlabel("timed window x iterations per epoch, over the median of the repeated runs (s)")
    ax2.set_ylabel("y (rows)")
    got = figtools.layout_problems(fig2)
    assert any("clipped" in p and "timed window" in p for p in got)

    fig4, ax4 = plt.subplots(figsize=(3, 2.5))
    ax4.bar(["shared (LSM-GNN)", "isolated (GIDS multi-GPU)", "one device, 2x cache"], [3, 4, 3])
    ax4.set_xlabel("system")
    ax4.set_ylabel("rows (count)")
    assert any("tick labels" in p and "overlap" in p for p in figtools.layout_problems(fig4, tight=True))

    fig3, ax3 = plt.subplots(figsize=(4, 3), layout="constrained")
    ax3.plot(x, x, label="rising line")
    ax3.legend(loc="upper left")                      # the top-left corner is empty for a rising line
    ax3.set_xlabel("x (s)")
    ax3.set_ylabel("y (rows)")
    assert figtools.layout_problems(fig3) == []
    plt.close("all")


def keep_saved(monkeypatch) -> dict:
    saved = {}
    monkeypatch.setattr(figtools, "save_figure",
                        lambda fig, path, **kw: saved.__setitem__(Path(path).name, (fig, kw.get("bbox_inches", "tight") == "tight")))
    return saved


def test_the_testbed_figure_names_the_systems_and_keeps_its_title_on_the_page(tmp_path, monkeypatch):
    import testbed_report

    rng = np.random.default_rng(3)
    systems = {s: {"median_s": m, "min_s": m * 0.97, "max_s": m * (1 + rng.uniform(0.01, 0.05))}
               for s, m in (("lsm", 40.0), ("isolated", 55.0), ("direct", 310.0), ("distdgl", 12.0))}
    summary = {"batches": {"1024": {"systems": systems}}, "time_scale": 256.0, "storage_profile": "paper",
               "accelerator": "a100", "devices": 2}
    saved = keep_saved(monkeypatch)
    testbed_report.figure(summary, tmp_path / "testbed_epoch.png")
    fig, tight = saved["testbed_epoch.png"]
    assert figtools.layout_problems(fig, tight=tight) == []
    labels = [t.get_text().replace("\n", " ") for t in fig.axes[0].get_xticklabels()]
    assert labels == ["LSM-GNN", "isolated caches", "O_DIRECT", "Dist-DGL"]
    plt.close("all")


def test_the_gpu_calls_figure_draws_every_call_and_target_from_reports_gpu(tmp_path, monkeypatch):
    import gpu_report

    calls = gpu_report.load_calls(REPO / "reports" / "gpu")
    saved = keep_saved(monkeypatch)
    monkeypatch.setattr(gpu_report, "save_figure", figtools.save_figure)   # bound when it was imported
    gpu_report.figure(calls, tmp_path / "gpu_calls.png")
    fig, tight = saved["gpu_calls.png"]
    assert figtools.layout_problems(fig, tight=tight) == []
    targets = {k for _, c in calls for k in c["targets"]}
    assert len(fig.axes) == len(targets) + 1
    # every call's value of every target is a bar of its panel, unchanged
    for ax, key in zip(fig.axes, list(dict.fromkeys(k for _, c in calls for k in c["targets"]))):
        heights = [p.get_height() for p in ax.patches]
        assert heights == pytest.approx([c["targets"][key]["value"] for _, c in calls])
    plt.close("all")


def test_a_folder_without_gpu_calls_is_refused_by_name(tmp_path):
    import gpu_report

    with pytest.raises(FileNotFoundError, match=str(tmp_path)):
        gpu_report.load_calls(tmp_path)


def test_the_claims_figure_marks_what_did_not_count_and_draws_the_papers_value(tmp_path, monkeypatch):
    import verdicts_report

    ev = lambda kind, v, lo, hi, counted: {"kind": kind, "value": v, "min": lo, "max": hi, "counted": counted,  # noqa: E731
                                           "text": f"{v}", "reason": "" if counted else "a validation failed"}
    found = [dict(verdicts_report.CLAIMS["a"], claim="a", verdict="holds", kind="emulated",
                  evidence=[ev("measured on this machine", 0.29, 0.24, 0.38, False), ev("emulated", 9.5, 9.4, 10.7, True),
                            ev("projected", 2.3, 1.3, 5.8, False)]),
             dict(verdicts_report.CLAIMS["b"], claim="b", verdict="holds", kind="simulated",
                  evidence=[ev("simulated", 0.81, 0.67, 0.81, True)]),
             dict(verdicts_report.CLAIMS["e"], claim="e", verdict="not measured here", kind="measured on this machine",
                  evidence=[ev("measured on this machine", 0.112, 0.095, 0.295, False)]),
             dict(verdicts_report.CLAIMS["c"], claim="c", verdict="not measured here", kind=None, evidence=[])]
    saved = keep_saved(monkeypatch)
    verdicts_report.claims_figure(found, tmp_path / "claims.png")
    fig, tight = saved["claims.png"]
    assert figtools.layout_problems(fig, tight=tight) == []
    assert len(fig.axes) == 3                          # a claim with no evidence draws no panel
    a, b, e = fig.axes
    assert a.get_xscale() == "log" and a.get_title(loc="left").startswith("(a)") and a.get_title(loc="left").endswith(": holds")
    assert [t.get_text().split("\n")[0] for t in a.get_yticklabels()] == ["measured on this machine (not counted)", "emulated",
                                                          "projected (not counted)"]
    # the paper's value is the dashed line; (e), where the paper gives no number, is drawn in percent
    # with the reading's 10 % line dotted, not as a paper's value
    assert any(abs(line.get_xdata()[0] - 3.75) < 1e-9 for line in a.lines if line.get_linestyle() == "--")
    # the paper's 3.75 labelled on its own: no fixed tick (5) beside it to read as "3.755"
    assert [float(t.get_text()) for t in a.get_xticklabels()] == [0.25, 0.5, 1, 2, 3.75, 10]
    assert any(abs(line.get_xdata()[0] - 10.0) < 1e-9 for line in e.lines if line.get_linestyle() == ":")
    assert not any(line.get_linestyle() == "--" for line in e.lines)
    # hollow (white-faced) marks for what did not count, filled for what did
    faces = [line.get_markerfacecolor() for line in a.lines if line.get_marker() not in (None, "None", "")]
    assert faces.count("white") == 2
    plt.close("all")


def test_the_first_screen_says_each_verdict_with_the_evidence_that_decided_it():
    import verdicts_report

    found = [dict(verdicts_report.CLAIMS["a"], claim="a", verdict="holds", kind="emulated",
                  evidence=[{"kind": "measured on this machine", "value": 0.29, "min": 0.2, "max": 0.4, "counted": False,
                             "text": "0.29x [0.20-0.40]", "reason": "the runs spread 23.4 % (limit 5 %)"},
                            {"kind": "emulated", "value": 9.47, "min": 9.39, "max": 10.68, "counted": True,
                             "text": "9.47x [9.39-10.68] at batch 1024", "reason": ""}])]
    text = verdicts_report.first_screen(found)
    assert text.startswith("- **(a)** one node with 2 GPUs beats Dist-DGL")
    assert "**holds**, emulated: 9.47x [9.39-10.68] at batch 1024; measured on this machine: 0.29x [0.20-0.40] " \
           "(not counted: the runs spread 23.4 % (limit 5 %))." in text
