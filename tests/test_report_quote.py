"""One home per number: the README's and docs' quoted figures equal their source
(lsm_gnn/report/quote.py, `lsm-gnn report quote`)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lsm_gnn.report.quote import (REFERENCE_DIR, TABLES, Sources, check_dated, check_figures, dated_commits, documents,
                                  format_value, quote, render)

ROOT = Path(__file__).resolve().parents[1]


def _repo(tmp_path: Path, readme: str, timings: dict | None = None) -> Path:
    ref = tmp_path / "reports" / "reference"
    ref.mkdir(parents=True)
    (ref / "timings.json").write_text(json.dumps(timings or {
        "ratios": {"distdgl_vs_lsm_epoch": 0.2396},
        "systems": {"lsm d2 c0.1 [a100]": {"epoch_steady_s": 361.19, "steady_min": 330.9, "steady_max": 380.7,
                                           "steady_spread": 0.138, "runs": 5, "au": 0.0546},
                    "distdgl 2x2 [a100]": {"epoch_steady_s": 86.54, "steady_min": 68.6, "steady_max": 115.3,
                                           "steady_spread": 0.539, "runs": 5, "au": 0.12},
                    "lsm d2 c0.1 [real]": {"epoch_steady_s": 312.2, "steady_min": 312.2, "steady_max": 312.2,
                                           "steady_spread": 0.0, "runs": 1, "au": None}}}))
    (ref / "reference.json").write_text(json.dumps({"commit": "98e4125fb1d9", "wall_s": 1279.6}))
    (tmp_path / "README.md").write_text(readme)
    (tmp_path / "docs").mkdir()
    return tmp_path


def test_the_readme_and_docs_quote_every_figure_as_its_source_has_it():
    changed, problems = quote(ROOT, write=False)
    assert not problems, "\n".join(map(str, problems))
    assert not changed, f"run `lsm-gnn report quote`: {changed}"


def test_the_readme_opens_with_the_findings_table_and_quotes_the_reference_run():
    text = (ROOT / "README.md").read_text()
    for marker in ("reference:wall_s|minutes", "reference:commit|short", "<!-- table findings -->"):
        assert marker in text, marker
    lines = text.splitlines()
    assert next(i for i, line in enumerate(lines) if line.startswith("| claim |")) < 40
    assert len(re.findall(r"\S+", text)) <= 1500
    assert len(re.findall(r"^```sh\n(?:make \S+.*\n)+```", text, re.M)) >= 1
    # exactly two commands under "Two commands"
    two = text[text.index("## Two commands"):text.index("\n## ", text.index("## Two commands") + 3)]
    block = two[two.index("```sh"):two.index("```", two.index("```sh") + 5)]
    assert [line.split()[1] for line in block.splitlines()[1:]] == ["reproduce", "test"]
    results = (ROOT / "docs" / "results.md").read_text()
    for marker in ("timings:ratios/distdgl_vs_lsm_epoch|", "timings:ratios/isolated_vs_lsm_epoch|",
                   "timings:claim_a_measured/spread_distdgl|", "timings:projection_paper_distdgl_vs_lsm/batch 1024/base|",
                   "figures:figures/pvp/points/hybrid b1024 W8 h0.1/storage_rows_vs_min|", "<!-- table reference-systems -->"):
        assert marker in results, marker


def test_the_findings_table_has_a_row_per_claim_with_each_kind_of_evidence(tmp_path):
    ref = tmp_path / REFERENCE_DIR
    ref.mkdir(parents=True)
    ev = lambda kind, counted: {"kind": kind, "value": 2.0, "min": 1.5, "max": 2.5, "counted": counted,  # noqa: E731
                                "text": "2.00x [1.50-2.50]", "reason": "" if counted else "the runs spread 9 %"}
    found = [{"claim": "a", "label": "(a)", "statement": "one node beats Dist-DGL", "paper": "up to 3.75x",
              "verdict": "holds only when", "kind": "emulated", "section": "Paper testbed",
              "evidence": [ev("measured on this machine", False), ev("emulated", True)]},
             {"claim": "d_authors", "label": "(d)", "statement": "the buffer helps, authors' configuration", "paper": "lower",
              "verdict": "holds", "kind": "simulated", "section": "The victim buffer's regime", "evidence": []}]
    (ref / "timings.json").write_text(json.dumps({"findings": found}))
    (ref / "report.md").write_text("# r\n## Paper testbed, emulated at scale 64\n## The victim buffer's regime (PVP)\n")
    table = TABLES["findings"](Sources(tmp_path))
    rows = table.splitlines()[2:]
    assert len(rows) == 2
    assert rows[0].startswith("| (a) one node beats Dist-DGL | up to 3.75x | **holds only when** (emulated) |")
    assert "measured on this machine: 2.00x [1.50-2.50] (not counted); emulated: 2.00x [1.50-2.50]" in rows[0]
    assert "(reports/reference/report.md#paper-testbed-emulated-at-scale-64)" in rows[0]   # the section the finding names
    assert rows[1].startswith("| (d) the buffer helps") and "#the-victim-buffers-regime-pvp)" in rows[1]
    (ref / "timings.json").write_text(json.dumps({"ratios": {}}))
    with pytest.raises(KeyError, match="findings"):
        TABLES["findings"](Sources(tmp_path))


def test_a_quoted_number_that_differs_from_its_source_is_found_and_filled(tmp_path):
    root = _repo(tmp_path, "Dist-DGL over LSM-GNN: <!-- q timings:ratios/distdgl_vs_lsm_epoch|.2f -->0.69<!-- /q -->x.\n")
    changed, problems = quote(root, write=False)
    assert [(p.what, p.found, p.expected, p.line) for p in problems] == [("differs", "0.69", "0.24", 1)]
    assert changed == [root / "README.md"]
    assert "0.69" in (root / "README.md").read_text()  # --check changes nothing
    changed, problems = quote(root, write=True)
    assert not problems
    assert "-->0.24<!-- /q -->x." in (root / "README.md").read_text()
    assert quote(root, write=False) == ([], [])


def test_a_marker_naming_a_figure_its_source_lacks_is_an_error_even_when_filling(tmp_path):
    root = _repo(tmp_path, "x <!-- q timings:ratios/nothing_like_it|.2f -->1.00<!-- /q -->\n"
                           "y <!-- q nosuch:a|.2f -->1<!-- /q -->\n")
    _, problems = quote(root, write=True)
    assert [p.what for p in problems] == ["missing", "missing"]
    assert "nothing_like_it" in str(problems[0]) and "distdgl_vs_lsm_epoch" in str(problems[0])
    assert "unknown source 'nosuch'" in str(problems[1])
    assert "1.00" in (root / "README.md").read_text()  # left as it was


def test_a_marker_shown_as_code_is_an_example_not_a_marker(tmp_path):
    root = _repo(tmp_path, "write `<!-- q SOURCE:PATH|FMT -->VALUE<!-- /q -->` and `<!-- table NAME -->`\n")
    assert quote(root, write=False) == ([], [])


def test_keys_with_spaces_and_dots_and_named_formats_resolve(tmp_path):
    root = _repo(tmp_path, "")
    src = Sources(root)
    assert src.get("timings", "systems/lsm d2 c0.1 [a100]/runs") == 5
    assert format_value(1279.6, "minsec") == "21 min 20 s"
    assert format_value(1279.6, "minutes") == "21"
    assert format_value(0.5393, "pct1") == "53.9"
    assert format_value(6149902336.0, ",.0f") == "6,149,902,336"
    with pytest.raises(ValueError):
        format_value("abc", ".2f")


def test_a_generated_table_is_indented_as_its_marker_and_lists_emulated_systems_only(tmp_path):
    root = _repo(tmp_path, "- item\n\n  <!-- table reference-systems -->\n  stale\n  <!-- /table -->\n")
    quote(root, write=True)
    text = (root / "README.md").read_text()
    lines = text.splitlines()
    body = lines[lines.index("  <!-- table reference-systems -->") + 1:lines.index("  <!-- /table -->")]
    assert all(line.startswith("  |") for line in body) and len(body) == 4
    assert "stale" not in text and "[real]" not in text
    # fastest first, the ratio against LSM-GNN's median
    assert body[2].startswith("  | distdgl 2x2 [a100] | 86.5 [68.6, 115.3] | 53.9 % | 5 | 12.0 % | 0.24 |")
    assert body[3].startswith("  | lsm d2 c0.1 [a100] | 361.2 [330.9, 380.7] | 13.8 % | 5 | 5.5 % | 1.00 |")


def test_a_dated_line_must_name_its_commit_date_and_command():
    good = "**Dated**: commit `cd526dd`, 2026-12-02, `lsm-gnn bench compare --repeats 5`\n"
    assert check_dated(good) == []
    assert dated_commits(good) == ["cd526dd"]
    for bad in ("**Dated**: 2026-12-02, `lsm-gnn bench compare`\n",
                "**Dated**: commit `cd526dd`, `lsm-gnn bench compare`\n",
                "**Dated**: commit `cd526dd`, 2026-12-02\n",
                "**Dated**: commit `main`, 2026-12-02, `x`\n"):
        assert [p.what for p in check_dated(bad)] == ["dated"], bad


def test_every_dated_commit_the_docs_name_exists_in_the_history():
    shallow = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--is-shallow-repository"],
                             capture_output=True, text=True).stdout.strip() == "true"
    missing = []
    for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for c in dated_commits(p.read_text()):
            ok = subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{c}^{{commit}}"],
                                capture_output=True).returncode == 0
            if not ok:
                missing.append(f"{p.name}: {c}")
    if missing and shallow:
        pytest.skip(f"a shallow clone lacks the dated commits {missing}")
    assert not missing


def test_the_command_line_check_exits_1_on_a_difference(tmp_path):
    root = _repo(tmp_path, "<!-- q reference:wall_s|minutes -->25<!-- /q --> minutes\n")
    run = subprocess.run([sys.executable, "-m", "lsm_gnn.cli", "report", "quote", "--check", "--root", str(root)],
                         capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 1
    assert "quoted '25', source says '21'" in run.stderr
    run = subprocess.run([sys.executable, "-m", "lsm_gnn.cli", "report", "quote", "--root", str(root)],
                         capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    assert render((root / "README.md").read_text(), Sources(root))[1] == []


def test_every_ratio_and_percentage_in_the_readme_and_docs_is_quoted_or_dated():
    problems = []
    for p in documents(ROOT):
        problems += check_figures(p.read_text(), str(p.relative_to(ROOT)))
    assert not problems, "\n".join(map(str, problems))


def _figures(text: str) -> list[str]:
    return [p.marker for p in check_figures(text)]


def test_a_bare_result_figure_is_flagged():
    assert _figures("LSM-GNN was 2.4x faster.\n") == ["2.4x"]
    assert _figures("the cache serves 38 % of the rows and storage 59%.\n") == ["38 %", "59%"]
    assert _figures("a ratio of 2.31 x, an error of -6.3 % and +21.8 %\n") == ["2.31 x", "-6.3 %", "+21.8 %"]
    assert _figures("| lsm | 0.1 % | 1.932x [1.321, 2.544] |\n") == ["0.1 %", "1.932x"]
    # "within" alone is no target: a matched figure is a result
    assert _figures("the projection matched within 6.3 %.\n") == ["6.3 %"]
    # the paper named in an earlier sentence does not cover this one
    assert _figures("The paper reports 3.75x. We measured 0.29x.\n") == ["0.29x"]
    # a Dated line covers its own section only
    assert _figures("## A\n\n**Dated**: commit `cd526dd`, 2026-12-02, `x`\n\n1.5x\n\n## B\n\n2.5x\n") == ["2.5x"]


def test_a_quoted_dated_coded_or_setting_figure_is_accepted():
    accepted = [
        # quoted by a marker or a generated table
        "Dist-DGL over LSM-GNN: <!-- q timings:ratios/distdgl_vs_lsm_epoch|.2f -->0.29<!-- /q -->x.",
        "<!-- table reference-systems -->\n| lsm | 13.8 % | 1.00 |\n<!-- /table -->",
        # code, fenced or inline
        "```\nlsm-gnn simulate --cache-fraction 10%  # 2x\n```",
        "run `bench --factor 1.5x` here",
        # in a section below a Dated line
        "## M\n\n**Dated**: commit `cd526dd`, 2026-12-02, `lsm-gnn bench compare`\n\nLSM-GNN 2.4x, AU 68.2 %.",
        # a comparison, a target word before or after, a share of the memory budget, the paper
        "spread <= 5 %, AU >= 90 %, late by more than 1 %, at most 2x, flagged above 5 %",
        "tolerance 10 %, the target of 1.3x, (limit 5 %), Target: within 3 % at every depth",
        "the 50x target, a 5 % limit, the 3.75x claim",
        "LSM-GNN at 10 % memory, 10 % of the features, a 10 % feature memory, 90 % cache lines + 10 % host tier",
        "the paper's 3.75x over Dist-DGL; the paper reports up to 3.75x",
        # products, not ratios; a number inside a word
        "2 x 2 GPUs, 1024 x fp32, 0.9 x the time, Dist-DGL 2x2, x1.08, 4xlarge",
    ]
    for text in accepted:
        assert _figures(text + "\n") == [], text


def test_a_bare_figure_fails_the_command_line_check(tmp_path):
    root = _repo(tmp_path, "LSM-GNN was 2.4x faster.\n")
    _, problems = quote(root, write=False)
    assert [(p.what, p.marker, p.line) for p in problems] == [("figure", "2.4x", 1)]
    run = subprocess.run([sys.executable, "-m", "lsm_gnn.cli", "report", "quote", "--check", "--root", str(root)],
                         capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 1
    assert "README.md:1: 2.4x: a result figure neither quoted" in run.stderr
