"""The asv comparison (benchmarks/compare.py): parsing of asv result files and the split between
behaviour changes (track_ counts, exactly equal or not) and performance changes (time_ samples,
asv's significance test and the factor). A small result-file fixture; asv itself is not run."""

import io
import json
import subprocess
import shutil

import pytest

from benchmarks.compare import BEHAVIOUR, PERFORMANCE, compare, load_results, main, report, result_file

COLUMNS = ["result", "params", "version", "started_at", "duration", "stats_ci_99_a", "stats_ci_99_b",
           "stats_q_25", "stats_q_75", "stats_number", "stats_repeat", "samples", "profile"]


def _timing(samples):
    s = sorted(samples)
    return {"result": s[len(s) // 2], "ci_a": s[0] * 0.99, "ci_b": s[-1] * 1.01, "samples": samples}


def _write(path, commit, *, replay, rows, belady, failed=False):
    """One asv result file (format version 2) with a parameterized timing, a parameterized count
    and a plain timing."""
    results = {
        "bench_cache.CacheReplay.time_replay": [
            [t["result"] for t in replay], [["'hybrid'", "'lru'"]], "v1", 0, 1.0,
            [t["ci_a"] for t in replay], [t["ci_b"] for t in replay], None, None, [1, 1], [10, 10],
            [t["samples"] for t in replay]],
        "bench_figures.PolicyFigures.track_storage_rows": [
            rows, [["'hybrid'", "'lru'"]], "v2", 0, 1.0],
        "bench_sim.BoundsSuite.time_belady_min": (
            [None, [], "v3", 0, 1.0] if failed else
            [[belady["result"]], [], "v3", 0, 1.0, [belady["ci_a"]], [belady["ci_b"]], None, None, [1], [10],
             [belady["samples"]]]),
    }
    doc = {"commit_hash": commit, "env_name": "virtualenv-py3.11", "date": 0, "params": {}, "python": "3.11",
           "requirements": {}, "env_vars": {}, "result_columns": COLUMNS, "results": results,
           "durations": {}, "version": 2}
    path.write_text(json.dumps(doc))
    return str(path)


BASE = [0.100, 0.101, 0.099, 0.102, 0.100, 0.098, 0.101, 0.100, 0.103, 0.099]


@pytest.fixture
def files(tmp_path):
    def make(name, commit, scale_hybrid=1.0, rows=(500, 400), belady_scale=1.0, failed=False):
        replay = [_timing([x * scale_hybrid for x in BASE]), _timing([x * 2 for x in BASE])]
        belady = _timing([x * belady_scale * 3 for x in BASE])
        return load_results(_write(tmp_path / name, commit, replay=replay, rows=list(rows), belady=belady,
                                   failed=failed))
    return make


def test_a_result_file_is_read_into_one_entry_per_parameter_combination(files):
    r = files("a.json", "a" * 40)
    assert sorted(r) == ["bench_cache.CacheReplay.time_replay('hybrid')",
                         "bench_cache.CacheReplay.time_replay('lru')",
                         "bench_figures.PolicyFigures.track_storage_rows('hybrid')",
                         "bench_figures.PolicyFigures.track_storage_rows('lru')",
                         "bench_sim.BoundsSuite.time_belady_min"]
    assert r["bench_figures.PolicyFigures.track_storage_rows('lru')"].value == 400
    assert len(r["bench_cache.CacheReplay.time_replay('lru')"].samples) == 10


def test_two_identical_result_sets_report_no_change_and_exit_zero(files):
    a, b = files("a.json", "a" * 40), files("b.json", "b" * 40)
    behaviour, slower, faster = compare(a, b, 1.15)
    assert (behaviour, slower, faster) == ([], [], [])
    assert report(behaviour, slower, faster, 1.15, out=io.StringIO()) == 0


def test_a_slowdown_beyond_the_factor_is_a_performance_change_not_a_behaviour_change(files):
    a, b = files("a.json", "a" * 40), files("b.json", "b" * 40, scale_hybrid=1.25)
    behaviour, slower, faster = compare(a, b, 1.15)
    assert behaviour == [] and faster == []
    assert [c.name for c in slower] == ["bench_cache.CacheReplay.time_replay('hybrid')"]
    assert slower[0].ratio == pytest.approx(1.25) and slower[0].p < 0.002
    out = io.StringIO()
    assert report(behaviour, slower, faster, 1.15, out=out) == PERFORMANCE
    assert "slower x1.25  bench_cache.CacheReplay.time_replay('hybrid')" in out.getvalue()


def test_a_significant_change_within_the_factor_is_not_flagged(files):
    a, b = files("a.json", "a" * 40), files("b.json", "b" * 40, scale_hybrid=1.10, belady_scale=0.9)
    assert compare(a, b, 1.15) == ([], [], [])


def test_a_speedup_beyond_the_factor_is_reported_as_faster(files):
    a, b = files("a.json", "a" * 40), files("b.json", "b" * 40, belady_scale=0.5)
    _, slower, faster = compare(a, b, 1.15)
    assert slower == [] and [c.name for c in faster] == ["bench_sim.BoundsSuite.time_belady_min"]


def test_a_count_that_differs_by_one_is_a_behaviour_change(files):
    a, b = files("a.json", "a" * 40), files("b.json", "b" * 40, rows=(501, 400))
    behaviour, slower, faster = compare(a, b, 1.15)
    assert [(c.name, c.a, c.b) for c in behaviour] == [
        ("bench_figures.PolicyFigures.track_storage_rows('hybrid')", 500, 501)]
    out = io.StringIO()
    assert report(behaviour, slower, faster, 1.15, out=out) == BEHAVIOUR
    assert "Behaviour changes (track_ figures must be exactly equal): 1" in out.getvalue()


def test_a_benchmark_that_fails_at_one_commit_is_a_behaviour_change(files):
    a, b = files("a.json", "a" * 40), files("b.json", "b" * 40, failed=True)
    behaviour, _, _ = compare(a, b, 1.15)
    assert [(c.name, c.note) for c in behaviour] == [("bench_sim.BoundsSuite.time_belady_min",
                                                     "failed or missing at one commit")]


def test_a_result_file_of_another_format_version_is_an_error_naming_the_file(tmp_path):
    p = tmp_path / "old.json"
    p.write_text(json.dumps({"version": 1, "results": {}}))
    with pytest.raises(ValueError, match=r"old\.json: expected an asv result file of version 2, found version 1"):
        load_results(str(p))


def test_the_stored_results_of_two_commits_are_compared_without_running_asv(tmp_path, files, monkeypatch, capsys):
    import benchmarks.compare as cmp

    a, b = "1" * 40, "2" * 40
    machine = tmp_path / ".asv" / "results" / "box"
    machine.mkdir(parents=True)
    rep = [_timing(BASE), _timing(BASE)]
    _write(machine / f"{a[:8]}-virtualenv.json", a, replay=rep, rows=[5, 4], belady=_timing(BASE))
    _write(machine / f"{b[:8]}-virtualenv.json", b, replay=rep, rows=[5, 3], belady=_timing([x * 1.5 for x in BASE]))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cmp, "_git", lambda *args: a if args[-1].startswith("A") else b)
    assert result_file(".asv/results", "box", a).endswith(f"{a[:8]}-virtualenv.json")
    assert main(["A", "B", "--no-run", "--machine", "box"]) == BEHAVIOUR | PERFORMANCE
    out = capsys.readouterr().out
    assert "track_storage_rows('lru'): 4 -> 3" in out and "slower x1.50  bench_sim.BoundsSuite.time_belady_min" in out
    assert main(["A", "B", "--no-run", "--machine", "box", "--all"]) == BEHAVIOUR | PERFORMANCE
    assert "All timings (B / A):\n  x1.000  bench_cache.CacheReplay.time_replay('hybrid')" in capsys.readouterr().out
    shutil.rmtree(machine)
    with pytest.raises(FileNotFoundError, match="no asv result for commit 11111111"):
        main(["A", "B", "--no-run", "--machine", "box"])


def test_asv_environment_pins_every_core_dependency_at_the_requirements_pin():
    """The benchmarked commit is installed with --no-deps: a core dependency missing from asv's
    matrix fails every benchmark that imports it, at both commits alike (so no comparison shows it)."""
    import re
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    text = re.sub(r"^\s*//.*$", "", (root / "asv.conf.json").read_text(), flags=re.M)
    matrix = json.loads(text)["matrix"]["req"]
    pins = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", (root / "requirements.txt").read_text(), flags=re.M))
    pins = {k.lower(): v for k, v in pins.items()}
    core = tomllib.loads((root / "pyproject.toml").read_text())["project"]["dependencies"]
    names = [re.match(r"[A-Za-z0-9_.-]+", d).group(0).lower() for d in core]
    assert {n: matrix.get(n) for n in names} == {n: pins.get(n) for n in names}


def test_rounds_and_benchmark_patterns_reach_every_rounds_asv_run():
    from argparse import Namespace

    from benchmarks.compare import asv_run_command, round_orders

    args = Namespace(asv="asv", machine="vm", cpu="1", rounds=4, bench=["bench_cache"])
    cmd = asv_run_command(args, "/tmp/h.txt")
    assert cmd[:2] == ["asv", "run"] and "HASHFILE:/tmp/h.txt" in cmd and "--append-samples" not in cmd
    assert cmd[cmd.index("-a") + 1] == "rounds=1" and cmd[cmd.index("-b") + 1] == "bench_cache"
    assert cmd[cmd.index("--cpu-affinity") + 1] == "1" and "--no-interleave-rounds" in cmd
    later = asv_run_command(args, "h", append=True)
    assert "--append-samples" in later
    # the later rounds time the time_ benchmarks the patterns select, and leave the exact track_ ones
    import re

    (pattern,) = [later[i + 1] for i, x in enumerate(later) if x == "-b"]
    names = ["bench_cache.CacheReplay.time_replay", "bench_cache.CacheReplay.track_storage_rows",
             "bench_sim.BoundsSuite.time_belady_min"]
    assert [n for n in names if re.search(pattern, n)] == ["bench_cache.CacheReplay.time_replay"]
    (pattern,) = [x for i, x in enumerate(asv_run_command(Namespace(**{**vars(args), "bench": []}), "h", True))
                  if i and asv_run_command(Namespace(**{**vars(args), "bench": []}), "h", True)[i - 1] == "-b"]
    assert [n for n in names if re.search(pattern, n)] == [names[0], names[2]]
    with pytest.raises(SystemExit, match="--rounds"):
        round_orders(["a", "b"], 0)


def test_each_round_runs_the_commits_in_the_other_order_and_appends_to_the_first(tmp_path, monkeypatch, capsys):
    """`make bench-compare` with asv stubbed: the order of the commits in each round's asv run."""
    import benchmarks.compare as cmp

    a, b, c = "1" * 40, "2" * 40, "3" * 40
    machine = tmp_path / ".asv" / "results" / "box"
    machine.mkdir(parents=True)
    for h in (a, b, c):
        _write(machine / f"{h[:8]}-virtualenv.json", h, replay=[_timing(BASE), _timing(BASE)], rows=[5, 4],
               belady=_timing(BASE))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cmp, "_git", lambda *args: {"A": a, "B": b, "C": c}[args[-1][0]])
    runs, real_run = [], subprocess.run

    def fake_run(cmd, **kw):
        if cmd[0] != "asv-stub":
            return real_run(cmd, **kw)  # what else calls subprocess (the platform module) runs
        if cmd[1] == "run":
            spec = next(x for x in cmd if x.startswith("HASHFILE:"))
            with open(spec[len("HASHFILE:"):]) as f:
                runs.append(([line.strip() for line in f if line.strip()], "--append-samples" in cmd))
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(cmp.subprocess, "run", fake_run)
    monkeypatch.setattr(cmp.time, "time", lambda: 0.0)  # the stored results count as this comparison's
    cmp.main(["A", "B", "--asv", "asv-stub", "--machine", "box", "--rounds", "4"])
    assert runs == [([a, b], False), ([b, a], True), ([a, b], True), ([b, a], True)]
    runs.clear()
    cmp.main(["A", "B", "C", "--asv", "asv-stub", "--machine", "box", "--rounds", "3"])  # several B: A first, then last
    assert [order for order, _ in runs] == [[a, b, c], [c, b, a], [a, b, c]]
    runs.clear()
    cmp.main(["A", "B", "--asv", "asv-stub", "--machine", "box"])  # the default: benchmarks/_timing.py's rounds
    from benchmarks._timing import Timed

    assert len(runs) == Timed.rounds and [o[0] for o, _ in runs] == [a, b] * (Timed.rounds // 2) + [a] * (Timed.rounds % 2)
    assert "round 2/4: 22222222 then 11111111" in capsys.readouterr().out
    assert all(append == (i > 0) for i, (_, append) in enumerate(runs))
