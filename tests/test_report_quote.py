"""One home per number: the README's and docs' quoted figures equal their source
(lsm_gnn/report/quote.py, `lsm-gnn report quote`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lsm_gnn.report.quote import Sources, check_dated, dated_commits, format_value, quote, render

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


def test_the_readme_quotes_the_reference_run_and_its_wall_time():
    text = (ROOT / "README.md").read_text()
    for marker in ("reference:wall_s|minutes", "timings:ratios/distdgl_vs_lsm_epoch|", "timings:ratios/isolated_vs_lsm_epoch|",
                   "timings:claim_a_measured/spread_distdgl|", "timings:projection_paper_distdgl_vs_lsm/batch 1024/base|",
                   "figures:figures/pvp/points/hybrid b1024 W8 h0.1/storage_rows_vs_min|", "<!-- table reference-systems -->"):
        assert marker in text, marker


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
