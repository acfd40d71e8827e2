"""`lsm-gnn report compare` (lsm_gnn/report/compare.py) on hand-made report folders, and the rules
that turn the workflow's data into the verdicts on the paper's claims (workflow/scripts/verdicts.py)."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from lsm_gnn.cli import cli
from lsm_gnn.report.compare import compare, load_report
from lsm_gnn.utils.errors import DataError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow/scripts"))
import verdicts as V  # noqa: E402

FIGURES = {"schema": "lsm-gnn-report-figures", "version": 1,
           "settings": {"dataset": "synthetic-small", "seed": 0, "batch_size": 128},
           "figures": {"policies": {"hybrid m0.1 W8": {"storage_rows": 1000, "storage_rows_vs_min": 2.005},
                                    "static m0.1 W8": {"storage_rows": 650, "storage_rows_vs_min": 1.306}}},
           "verdicts": {"b": {"verdict": "holds"}}}


def write_report(root: Path, figures: dict, epoch: float = 10.0, host: str = "a") -> Path:
    root.mkdir(parents=True)
    (root / "figures.json").write_text(json.dumps(figures))
    (root / "timings.json").write_text(json.dumps({"schema": "lsm-gnn-report-timings", "version": 1,
                                                   "systems": {"lsm d2 c0.1 [a100]": {"epoch_steady_s": epoch}}}))
    (root / "machine.json").write_text(json.dumps({"hardware": {"hostname": host, "cpus": 2}, "git_commit": "abc"}))
    return root


def test_reports_with_equal_figures_agree_and_their_timings_stand_side_by_side(tmp_path):
    a = write_report(tmp_path / "a", FIGURES, epoch=10.0, host="vm")
    b = write_report(tmp_path / "b", copy.deepcopy(FIGURES), epoch=12.5, host="laptop")
    res = compare(load_report(a), load_report(b))
    assert res["agree"] and res["comparable"] and res["figures"]["equal"] == 5 and not res["figures"]["differ"]
    assert ("systems.lsm d2 c0.1 [a100].epoch_steady_s", 10.0, 12.5, 1.25) in res["timings"]
    out = CliRunner().invoke(cli, ["report", "compare", str(a), str(b)])
    assert out.exit_code == 0, out.output
    assert "agree exactly" in out.output and "| hostname | vm | laptop |" in out.output and "| 1.25 |" in out.output


def test_a_changed_count_is_listed_and_the_command_exits_1(tmp_path):
    other = copy.deepcopy(FIGURES)
    other["figures"]["policies"]["hybrid m0.1 W8"]["storage_rows"] = 1001
    other["verdicts"]["e"] = {"verdict": "holds"}
    a, b = write_report(tmp_path / "a", FIGURES), write_report(tmp_path / "b", other)
    res = compare(load_report(a), load_report(b))
    assert not res["agree"] and res["comparable"]
    assert res["figures"]["differ"] == [("figures.policies.hybrid m0.1 W8.storage_rows", 1000, 1001)]
    assert res["figures"]["only_b"] == ["verdicts.e.verdict"]
    out = CliRunner().invoke(cli, ["report", "compare", str(a), str(b), "--out", str(tmp_path / "cmp.md")])
    assert out.exit_code == 1 and "DIFFER" in out.output
    assert "| figures.policies.hybrid m0.1 W8.storage_rows | 1000 | 1001 |" in (tmp_path / "cmp.md").read_text()


def test_reports_of_different_settings_are_not_comparable_and_the_command_exits_2(tmp_path):
    other = copy.deepcopy(FIGURES)
    other["settings"]["seed"] = 1
    a, b = write_report(tmp_path / "a", FIGURES), write_report(tmp_path / "b", other)
    out = CliRunner().invoke(cli, ["report", "compare", str(a), str(b), "--json"])
    assert out.exit_code == 2
    res = json.loads(out.output)
    assert not res["comparable"] and res["settings"]["differ"] == [["seed", 0, 1]]


def test_a_folder_without_figures_json_is_refused_naming_the_file(tmp_path):
    (tmp_path / "r").mkdir()
    with pytest.raises(DataError, match="figures.json.*no hardware-independent figures"):
        load_report(tmp_path / "r")
    (tmp_path / "r" / "figures.json").write_text(json.dumps({"schema": "something else"}))
    with pytest.raises(DataError, match="schema.*expected lsm-gnn-report-figures"):
        load_report(tmp_path / "r")


# ---- the verdict rules --------------------------------------------------------------------------
def test_the_shared_cache_verdict_follows_shared_over_isolated_per_policy():
    assert V.claim_b({"hybrid": 0.62, "lru": 0.55})["verdict"] == V.HOLDS
    part = V.claim_b({"hybrid": 0.9, "lru": 1.02})
    assert part["verdict"] == V.PARTLY and "hybrid" in part["why"]
    assert V.claim_b({"hybrid": 1.0})["verdict"] == V.NOT_HERE
    assert V.claim_b({})["verdict"] == V.NOT_MEASURED


def test_the_hybrid_verdict_names_the_regime_where_hybrid_wins():
    pts = [{"label": "batch 128 (headline)", "ratio": 14.0, "hybrid": 2.005, "static": 1.306, "dynamic": 1.9},
           {"label": "batch 32", "ratio": 60.0, "hybrid": 1.1, "static": 1.3, "dynamic": 1.2},
           {"label": "batch 2048", "ratio": 0.9, "hybrid": 1.0, "static": 1.0, "dynamic": 1.0}]
    v = V.claim_c(pts)
    assert v["verdict"] == V.PARTLY and v["wins"] == 1 and "batch 32 (60.0)" in v["why"]
    assert "hybrid 2.005, static 1.306" in v["figure"]
    nb = V.claim_c(pts, {"hybrid": 1.249, "static": 1.306, "dynamic": 1.553})
    assert nb["verdict"] == V.PARTLY and "without the victim buffer: hybrid 1.249" in nb["figure"]
    assert "(hybrid beats both)" in nb["figure"]
    assert V.claim_c(pts[1:2])["verdict"] == V.HOLDS
    assert V.claim_c(pts[2:])["verdict"] == V.NOT_HERE   # a tie is not a win


def test_the_victim_buffer_verdict_states_its_boundary_in_queue_depth_per_spill():
    head = {"with": 2005, "without": 1650, "depth_per_spill": 0.08, "spill_attempts_per_iteration": 15000,
            "dropped_per_iteration": 13900}
    v = V.claim_d(head, {"points": 10, "paying": 3, "pays_from": 1.5, "fails_up_to": 0.9, "separable": True})
    assert v["verdict"] == V.PARTLY and ">= 1.5" in v["why"] and "1.215" in v["figure"]
    assert V.claim_d(head, {"points": 4, "paying": 0, "pays_from": None, "fails_up_to": 0.9,
                            "separable": True})["verdict"] == V.NOT_HERE
    assert V.claim_d(None, None)["verdict"] == V.NOT_MEASURED


def test_the_dist_dgl_verdict_comes_from_the_projection_and_counts_a_measurement_only_under_5_percent():
    proj = {"run_batch": 128, "paper_batch": 1024, "1024": {"base": 2.86, "min": 1.3, "max": 6.8},
            "128": {"base": 1.16, "min": 1.0, "max": 1.5}}
    good = {"ratio": 1.4, "spread_lsm": 0.02, "spread_distdgl": 0.03, "runs": 3, "accelerator": "a100"}
    v = V.claim_a(good, proj)
    assert v["verdict"] == V.PARTLY and "3.75x inside that range" in v["why"] and v["measured_verdict"] == V.PARTLY
    noisy = V.claim_a({**good, "spread_distdgl": 0.12}, proj)
    assert noisy["measured_verdict"] == V.NOT_MEASURED and "12.0 %" in noisy["figure"]
    assert V.claim_a(good, {**proj, "1024": {"base": 4.0, "min": 2.0, "max": 7.0}})["verdict"] == V.HOLDS
    assert V.claim_a(good, {**proj, "1024": {"base": 0.9, "min": 0.5, "max": 1.2}})["verdict"] == V.NOT_HERE
    assert V.claim_a({}, {"run_batch": 128, "paper_batch": 1024})["verdict"] == V.NOT_MEASURED


def test_the_committed_reference_was_made_with_the_workflows_default_settings():
    """reports/reference is what a default `make reproduce` must match: a default that changes a
    figure's settings needs a new reference (make reference), and this test says so."""
    import yaml

    import figures_report

    root = Path(__file__).resolve().parents[1]
    ref = json.loads((root / "reports/reference/figures.json").read_text())
    defaults = yaml.safe_load((root / "config/config.yaml").read_text())
    want = {k: defaults.get(k) for k in figures_report.SETTINGS}
    assert ref["settings"] == json.loads(json.dumps(want)), "defaults changed: run make reproduce and make reference"
    res = compare(load_report(root / "reports/reference"), load_report(root / "reports/reference"))
    assert res["agree"] and res["figures"]["equal"] > 500
