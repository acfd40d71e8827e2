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


def test_the_hybrid_verdict_is_decided_without_the_buffer_and_names_the_regime_where_hybrid_wins():
    nobuf = [{"label": "batch 128, W = 8 (headline)", "ratio": 16.1, "hybrid": 1.249, "static": 1.293, "dynamic": 1.553},
             {"label": "batch 1024, W = 8", "ratio": 2.3, "hybrid": 1.125, "static": 1.265, "dynamic": 1.098}]
    # with the buffer hybrid loses at the headline: that must not decide (c)
    with_buf = [{"label": "batch 128 (headline, W = 8)", "ratio": 14.5, "hybrid": 2.005, "static": 1.306,
                 "dynamic": 1.605}]
    v = V.claim_c(nobuf, with_buf)
    assert v["kind"] == V.SIMULATED and v["verdict"] == V.PARTLY and v["wins"] == 1
    assert "batch 128, W = 8 (headline) (16.1)" in v["why"] and "not at batch 1024, W = 8 (2.3)" in v["why"]
    assert "no buffer, batch 128, W = 8 (headline): rows / MIN hybrid 1.249" in v["figure"]
    assert "with the victim buffer (not deciding" in v["figure"] and "at 0 of 1 points" in v["figure"]
    assert V.claim_c(nobuf[:1], with_buf)["verdict"] == V.HOLDS      # the buffer's points change nothing
    assert V.claim_c(with_buf)["verdict"] == V.NOT_HERE
    tie = [{"label": "b", "ratio": 1.0, "hybrid": 1.0, "static": 1.0, "dynamic": 1.0}]
    assert V.claim_c(tie)["verdict"] == V.NOT_HERE   # a tie is not a win
    assert V.claim_c([], with_buf)["verdict"] == V.NOT_MEASURED


def test_the_victim_buffer_verdict_states_its_boundary_and_the_authors_configuration_apart():
    head = {"with": 2005, "without": 1650, "depth_per_spill": 0.08, "spill_attempts_per_iteration": 15000,
            "dropped_per_iteration": 13900}
    authors = [{"batch": 128, "storage_rows": 900, "storage_rows_without": 1000, "extra_host_rows": 294912},
               {"batch": 1024, "storage_rows": 1100, "storage_rows_without": 1000, "extra_host_rows": 294912}]
    v = V.claim_d(head, {"points": 10, "paying": 3, "pays_from": 1.5, "fails_up_to": 0.9, "separable": True}, authors)
    assert v["verdict"] == V.PARTLY and ">= 1.5" in v["why"] and "equal memory" in v["figure"] and "1.215" in v["figure"]
    assert v["authors"]["verdict"] == V.PARTLY and v["authors"]["why"] == "the batch is 128 (not 1024)"
    assert "batch 128: with / without 0.900 (+294,912 host rows)" in v["authors"]["figure"]
    assert V.claim_d(head, None, authors[:1])["authors"]["verdict"] == V.HOLDS
    assert V.claim_d(head, None, authors[1:])["authors"]["verdict"] == V.NOT_HERE
    assert V.claim_d(head, {"points": 4, "paying": 0, "pays_from": None, "fails_up_to": 0.9,
                            "separable": True})["verdict"] == V.NOT_HERE
    none = V.claim_d(None, None)
    assert none["verdict"] == V.NOT_MEASURED and none["authors"]["verdict"] == V.NOT_MEASURED


PROJ = {"run_batch": 128, "paper_batch": 1024, "1024": {"base": 2.86, "min": 1.3, "max": 6.8},
        "128": {"base": 1.16, "min": 1.0, "max": 1.5}}
VALID = {"max_abs_error": 0.026, "tolerance": 0.10, "met": True}
GOOD = {"ratio": 1.4, "spread_lsm": 0.02, "spread_distdgl": 0.03, "runs": 3, "accelerator": "a100"}


def a_testbed(median=2.0, met=True):
    ok = {"met": met, "limit": 0.05, "by_system": {"lsm": 0.01, "distdgl": 0.08 if not met else 0.02}}
    return {"kind": "emulated", "storage_profile": "paper", "time_scale": 4, "accelerator": "a100", "devices": 2,
            "batches": {"1024": {"distdgl_vs_lsm": {"median": median, "min": median - 0.2, "max": median + 0.3}}},
            "validation": {"replication": ok, "dilation": {"met": True, "limit": 0.05, "by_system": {"lsm": 0.02}},
                           "emulator_vs_real": {"met": True, "limit": 0.10, "by_system": {"lsm": 0.04}},
                           "pacing": {"met": True, "limit": 0.01, "worst_late_fraction": 0.001}},
            "projection": {"batch": 1024, "distdgl_vs_lsm": 2.9, "relative_error": 0.45, "met": False}}


def test_each_kind_of_evidence_on_the_dist_dgl_claim_is_judged_apart_and_named():
    v = V.claim_a(GOOD, PROJ, a_testbed(), VALID)
    cols = v["columns"]
    assert set(cols) == {V.MEASURED, V.EMULATED, V.PROJECTED} and all(c["kind"] == k for k, c in cols.items())
    assert cols[V.PROJECTED]["verdict"] == V.PARTLY and "3.75x inside that range" in cols[V.PROJECTED]["why"]
    assert cols[V.MEASURED]["verdict"] == V.PARTLY
    assert cols[V.EMULATED]["verdict"] == V.PARTLY and "2.00x [1.80x-2.30x] at batch 1024" in cols[V.EMULATED]["why"]
    assert "time scale 4" in cols[V.EMULATED]["figure"] and "relative error 45.0 %" in cols[V.EMULATED]["figure"]
    assert v["kind"] == V.EMULATED and v["verdict"] == V.PARTLY       # the emulated verdict leads where it counts
    noisy = V.claim_a({**GOOD, "spread_distdgl": 0.12}, PROJ, None, VALID)["columns"][V.MEASURED]
    assert noisy["verdict"] == V.NOT_MEASURED and "12.0 %" in noisy["why"]
    assert V.claim_a(GOOD, {**PROJ, "1024": {"base": 4.0, "min": 2.0, "max": 7.0}}, None, VALID)["verdict"] == V.HOLDS
    assert V.claim_a(GOOD, {**PROJ, "1024": {"base": 0.9, "min": 0.5, "max": 1.2}}, None, VALID)["verdict"] == V.NOT_HERE


def test_a_projection_that_misses_its_validation_gives_no_verdict_and_says_by_how_much():
    bad = {"max_abs_error": 0.456, "tolerance": 0.10, "met": False}
    v = V.claim_a({}, PROJ, None, bad)
    p = v["columns"][V.PROJECTED]
    assert p["verdict"] == V.NO_VERDICT and "largest error 45.6 %, tolerance 10 %" in p["why"]
    assert "its validation misses the tolerance" in p["why"] and V.sentence(p).startswith("**no verdict**")
    assert v["verdict"] == V.NO_VERDICT and v["kind"] is None       # nothing else counts here
    assert V.claim_a({}, PROJ, None, None)["columns"][V.PROJECTED]["verdict"] == V.NO_VERDICT
    # a counted measurement is the verdict when the projection is not
    assert V.claim_a(GOOD, PROJ, None, bad)["kind"] == V.MEASURED


def test_an_emulated_measurement_with_a_failed_validation_gives_no_verdict_and_names_it():
    e = V.claim_a(GOOD, PROJ, a_testbed(met=False), VALID)["columns"][V.EMULATED]
    assert e["verdict"] == V.NO_VERDICT and "replication failed: 8.0 % (limit 5 %)" in e["why"]
    off = V.claim_a(GOOD, PROJ, None, VALID)["columns"][V.EMULATED]
    assert off["verdict"] == V.NOT_MEASURED and off["why"] == "not measured (testbed off: make reproduce-testbed)"
    unrun = a_testbed()
    unrun["validation"]["dilation"]["met"] = None
    assert "dilation not run" in V.claim_a(GOOD, PROJ, unrun, VALID)["columns"][V.EMULATED]["why"]
    assert V.claim_a(GOOD, PROJ, a_testbed(median=4.1), VALID)["columns"][V.EMULATED]["verdict"] == V.HOLDS


def test_the_communication_overhead_verdict_reads_the_exchange_share_of_every_run():
    low = {"median": 0.04, "min": 0.03, "max": 0.06, "runs": 3, "exchange_bytes": 1.5e9, "accelerator": "a100",
           "exchange_bytes_per_iteration": 25.6e6}
    v = V.claim_e(low)
    assert v["kind"] == V.MEASURED and v["verdict"] == V.HOLDS and "6.0 % of the epoch at most" in v["why"]
    assert "25.6 MB exchanged per iteration" in v["figure"] and "(min-max 3.0-6.0 %, 3 runs" in v["figure"]
    # an upper bound above the limit decides nothing: the share includes the wait for the slower rank
    high = V.claim_e({**low, "min": 0.12, "median": 0.15, "max": 0.2})
    assert high["verdict"] == V.NO_VERDICT and "12.0 % of the epoch at least" in high["why"]
    assert "upper bound" in high["why"]
    straddle = V.claim_e({**low, "max": 0.11})
    assert straddle["verdict"] == V.NOT_MEASURED and "straddle 10 %" in straddle["why"]
    assert V.claim_e({**low, "runs": 1})["verdict"] == V.NOT_MEASURED
    # bytes exchanged but no exchange time recorded: a missing measurement, not a low overhead
    untimed = V.claim_e({**low, "median": 0.0, "min": 0.0, "max": 0.0, "exchange_bytes": 1.5e9})
    assert untimed["verdict"] == V.NOT_MEASURED and "1,500 MB" in untimed["why"]
    assert V.claim_e(None)["verdict"] == V.NOT_MEASURED
    assert "10 %" in v["rule"] and "upper bound" in v["rule"]


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


def test_an_emulated_check_is_judged_by_its_figure_farthest_from_zero_and_needs_a_shaped_network():
    tb = a_testbed()
    tb["validation"]["dilation"] = {"met": False, "limit": 0.05,
                                    "by_system": {"lsm": -0.059, "isolated": -0.342, "direct": -0.029}}
    e = V.claim_a(GOOD, PROJ, tb, VALID)["columns"][V.EMULATED]
    assert e["verdict"] == V.NO_VERDICT and "dilation failed: -34.2 % (limit 5 %)" in e["why"]
    unshaped = {**a_testbed(), "network_emulation": "real"}
    u = V.claim_a(GOOD, PROJ, unshaped, VALID)["columns"][V.EMULATED]
    assert u["verdict"] == V.NO_VERDICT and "Dist-DGL's network not emulated (network_emulation: real)" in u["why"]
    assert V.claim_a(GOOD, PROJ, {**a_testbed(), "network_emulation": "emulated"}, VALID)["columns"][V.EMULATED][
        "verdict"] == V.PARTLY


def test_a_rate_only_network_decides_only_where_the_left_out_delay_cannot_cross_a_threshold():
    def rate_only(median, with_delay):
        tb = a_testbed(median)
        tb["network_emulation"] = "rate"
        tb["batches"]["1024"]["distdgl_vs_lsm"]["median_with_delay"] = with_delay
        return V.claim_a(GOOD, PROJ, tb, VALID)["columns"][V.EMULATED]

    same = rate_only(2.0, 2.1)  # both 'faster', short of 3.75x: the verdict stands, both figures shown
    assert same["verdict"] == V.PARTLY and "with the left-out network delay added back 2.10x" in same["why"]
    across = rate_only(0.98, 1.02)  # the delay added back crosses 1: no verdict, and why
    assert across["verdict"] == V.NO_VERDICT
    assert "adding it back moves the ratio from 0.98x to 1.02x, across a threshold" in across["why"]


def test_a_network_charged_by_the_testbed_counts_and_the_class_must_agree_at_every_host_speed():
    charged = {**a_testbed(5.0), "network_emulation": "charged"}
    agree = {"by_host_speed": {"0.5": {"ratio": 4.0, "class": ">= 3.75"}, "1": {"ratio": 5.0, "class": ">= 3.75"},
                               "2": {"ratio": 9.0, "class": ">= 3.75"}}, "missing": [], "decided": True,
             "class": ">= 3.75"}
    e = V.claim_a(GOOD, PROJ, {**charged, "verdict_by_host_speed": agree}, VALID)["columns"][V.EMULATED]
    assert e["verdict"] == V.HOLDS and "by f 0.5: 4.00x, 1: 5.00x, 2: 9.00x" in e["figure"]
    split = {**agree, "by_host_speed": {**agree["by_host_speed"], "0.5": {"ratio": 3.0, "class": "between 1 and 3.75"}},
             "decided": False, "class": None}
    e = V.claim_a(GOOD, PROJ, {**charged, "verdict_by_host_speed": split}, VALID)["columns"][V.EMULATED]
    assert e["verdict"] == V.NO_VERDICT and "the class is not the same at f = 0.5, 1 and 2" in e["why"]
    missing = {**agree, "missing": [0.5, 2.0], "decided": False, "class": None}
    e = V.claim_a(GOOD, PROJ, {**charged, "verdict_by_host_speed": missing}, VALID)["columns"][V.EMULATED]
    assert e["verdict"] == V.NO_VERDICT and "f 0.5, 2 not run" in e["why"]


def test_the_projected_verdict_reads_the_gated_figure_and_names_the_systems_it_is_taken_over():
    gated = {"max_abs_error": 0.04, "tolerance": 0.10, "met": True, "systems": ["lsm", "distdgl"]}
    p = V.claim_a({}, PROJ, None, gated)["columns"][V.PROJECTED]
    assert p["verdict"] == V.PARTLY
    assert "largest error 4.0 %, tolerance 10 % (over lsm, distdgl)" in p["figure"]
