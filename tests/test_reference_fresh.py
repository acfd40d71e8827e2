"""The reference report (reports/reference/) is built at a commit after which nothing that moves a
figure changed (tools/reference.py check; make reference rebuilds it)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("reference_tool", ROOT / "tools" / "reference.py")
ref = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ref)


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          check=True, capture_output=True, text=True).stdout.strip()


def _commit(repo: Path, path: str, text: str, msg: str) -> str:
    p = repo / path
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", msg)
    return _git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path):
    _git(tmp_path, "init", "-q")
    built = _commit(tmp_path, "lsm_gnn/cache.py", "a = 1\n", "the code the reference ran")
    d = tmp_path / "reports" / "reference"
    d.mkdir(parents=True)
    (d / "reference.json").write_text(json.dumps({"commit": built, "dirty": False}))
    (d / "README.md").write_text("# The reference report\n")
    _commit(tmp_path, "reports/reference/figures.json", "{}", "the reference, copied in")
    return tmp_path


def test_the_reference_is_built_at_a_commit_after_which_nothing_that_moves_a_figure_changed():
    r = ref.stale(ROOT)
    if not r["found"] and r["shallow"]:
        pytest.skip(f"a shallow clone lacks the reference's commit {r['commit'][:10]}: cannot tell")
    assert not r["dirty"], f"reports/reference was built on a dirty tree ({r['commit'][:10]})"
    assert r["found"], f"reports/reference names {r['commit'][:10]}, which is not in the history"
    assert not r["unnoted"], (
        f"{len(r['unnoted'])} commit(s) after the reference's {r['commit'][:10]} changed {', '.join(ref.WATCHED)}: "
        "rebuild it (make reference) or list them with their reason in reports/reference/README.md:\n"
        + "\n".join(f"{h[:10]} {s[:80]}" for h, s, _ in r["unnoted"]))


def test_a_later_change_to_the_library_is_stale_and_one_to_the_docs_is_not(repo):
    assert ref.stale(repo)["changed"] == []
    _commit(repo, "docs/x.md", "words\n", "docs only")
    _commit(repo, "tests/test_x.py", "pass\n", "a test only")
    assert ref.stale(repo)["changed"] == []
    moved = _commit(repo, "workflow/rules/x.smk", "rule x:\n", "a rule")
    r = ref.stale(repo)
    assert [c[0] for c in r["unnoted"]] == [moved]
    assert r["unnoted"][0][2] == ["workflow/rules/x.smk"]
    assert ref.check(repo) == 1


def test_a_change_listed_with_its_reason_in_the_reference_readme_is_accepted(repo):
    moved = _commit(repo, "lsm_gnn/cache.py", "a = 1  # why\n", "a comment")
    readme = repo / "reports" / "reference" / "README.md"
    # a line without a reason does not count
    readme.write_text(f"# R\n\n{ref.NOTE_HEADING}\n\n- `{moved[:9]}`\n")
    assert [c[0] for c in ref.stale(repo)["unnoted"]] == [moved]
    readme.write_text(f"# R\n\n{ref.NOTE_HEADING}\n\n- `{moved[:9]}` a comment only: no code ran differently\n\n## Other\n")
    assert ref.stale(repo)["unnoted"] == []
    assert ref.check(repo) == 0
    # the same line under another heading is no note
    readme.write_text(f"# R\n\n## Elsewhere\n\n- `{moved[:9]}` a comment only\n")
    assert len(ref.stale(repo)["unnoted"]) == 1


def test_a_reference_built_on_a_dirty_tree_or_at_an_unknown_commit_fails(repo):
    p = repo / "reports" / "reference" / "reference.json"
    built = json.loads(p.read_text())["commit"]
    p.write_text(json.dumps({"commit": built, "dirty": True}))
    assert ref.check(repo) == 1
    p.write_text(json.dumps({"commit": "0" * 40, "dirty": False}))
    r = ref.stale(repo)
    assert not r["found"] and not r["shallow"]
    assert ref.check(repo) == 1


def test_make_reference_takes_a_finished_report_and_records_its_commit_date_and_wall_time(tmp_path, monkeypatch):
    report = tmp_path / "reports" / "synthetic-tiny"
    (report / "sections").mkdir(parents=True)
    (report / "figures").mkdir()
    for name in ("report.md", "figures.json", "timings.json"):
        (report / name).write_text("{}")
    (report / "machine.json").write_text(json.dumps({
        "hardware": {"memory_bytes": 1000, "storage": {"device": "/dev/vda", "rotational": True}},
        "git_commit": "abc1234" + "0" * 33 + "-dirty", "written": "2026-12-03T16:00:00+00:00"}))
    monkeypatch.setattr(ref, "ROOT", tmp_path)
    monkeypatch.setattr(ref, "DEST", tmp_path / "reports" / "reference")
    with pytest.raises(SystemExit, match="dirty tree"):
        ref.take(report, 1280.0, allow_dirty=False, command=None)
    got = ref.take(report, 1280.0, allow_dirty=True, command="make reproduce SIZE=tiny")
    written = json.loads((tmp_path / "reports" / "reference" / "reference.json").read_text())
    assert written == got
    assert (written["commit"], written["dirty"], written["date"], written["wall_s"]) == (
        "abc1234" + "0" * 33, True, "2026-12-03", 1280.0)
    assert written["storage"]["device"] == "/dev/vda" and written["storage"]["fio"] is None
    assert (tmp_path / "reports" / "reference" / "sections").is_dir()


def test_make_reference_runs_the_reproduction_timed_or_takes_a_finished_report_with_its_wall_time():
    take = subprocess.run(["make", "-n", "reference", "WALL_S=1280", "SIZE=tiny"], cwd=ROOT, capture_output=True, text=True)
    assert "python3 tools/reference.py take reports/synthetic-tiny --wall-s 1280" in take.stdout, take.stdout + take.stderr
    # without WALL_S it runs `make reproduce` itself, or REFERENCE_TARGET (reproduce-testbed) (make -n would
    # run that line: only its text is checked)
    text = (ROOT / "Makefile").read_text()
    assert "run --report $(REPORT) -- $(MAKE) $(REFERENCE_TARGET)" in text and "REFERENCE_TARGET ?= reproduce\n" in text
