"""`lsm-gnn check gpu` on a machine without a GPU: `pytest -m gpu` is the whole GPU selection and
skips here with one reason; the check's verdict on a pytest run fails a skipped test, a run that
collects no GPU test and an import error; each test's result is kept as it ends, so a run killed
at its limit (a share of the budget) keeps the finished ones; each step's function takes the
check's arguments; and the check itself stops with a clear "no GPU" (exit 2 and a JSON that says
so). The same script on an environment of only the GPU machine's packages:
tests/test_gpu_check_rehearsal.py."""

from __future__ import annotations

import importlib
import inspect
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from lsm_gnn.check import gpu as gc
from lsm_gnn.check.env import FEWER_DEVICES, NO_GPU, gpu_presence, gpu_skip_reason

REPO = Path(__file__).resolve().parents[1]
GPU_HERE = gpu_presence()[0] > 0
CLI = [sys.executable, "-m", "lsm_gnn.cli"]


class _Selection:
    """A pytest plugin that keeps what `-m gpu` selected (with the reason each test skips for,
    None if it would run), what it deselected, and the reasons of modules skipped while collecting."""

    def __init__(self):
        self.selected, self.deselected, self.collect_skips = {}, [], []

    def pytest_deselected(self, items):
        self.deselected += [i.nodeid for i in items]

    def pytest_collectreport(self, report):
        if report.skipped:
            self.collect_skips.append(f"{report.nodeid}: {report.longrepr[-1]}")

    def pytest_collection_finish(self, session):
        from _pytest.skipping import evaluate_skip_marks  # pytest's own rule (skipif, then skip marks)

        for item in session.items:
            skip = evaluate_skip_marks(item)
            self.selected[item.nodeid] = skip.reason if skip else None


@pytest.fixture(scope="module")
def gpu_selection() -> _Selection:
    """`pytest -m gpu` over tests/, collected once in this process (the test modules are imported
    once, not in a new Python): the selection, the complement (`-m "not gpu"`) and the skips."""
    sel = _Selection()
    rc = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", "--rootdir", str(REPO), "-m", "gpu",
                      str(REPO / "tests")], plugins=[sel])
    assert rc == 0, f"collecting tests/ with -m gpu exited {rc}"
    return sel


# ---- one marker --------------------------------------------------------------------------------
def test_pytest_m_gpu_selects_the_gpu_tests_and_only_they_need_a_gpu(gpu_selection):
    gpu_ids, cpu_ids = list(gpu_selection.selected), gpu_selection.deselected
    # the GPU tests of every area are in the selection (a file that lost its marker shows here)
    for part in ("test_cache_gpu.py::", "[cupy", "test_cache_device_source.py::test_cuda_source",
                 "test_multidevice_owners.py::test_gpu_split", "test_multidevice_owners.py::test_gpu_tensor",
                 "test_multidevice_exchange.py::test_device_plane_over_nccl_one_gpu",
                 "test_multidevice_exchange.py::test_device_plane_over_nccl_two_gpus",
                 "test_multidevice_launch.py::test_shared_cache_on_gpus", "test_storage_gpu.py::test_gpu_rows"):
        assert any(part in i for i in gpu_ids), part
    assert not any("[cupy" in i for i in cpu_ids)
    assert not set(gpu_ids) & set(cpu_ids)
    # nothing else decides which tests need a GPU: no other skip on torch.cuda / CuPy being there
    needles = ("requires_gpu", "skipif(not torch.cuda", "skipif(not gpu", "skipif(not cupy", "skipif(_cuda_devices")
    for f in sorted((REPO / "tests").glob("test_*.py")):
        if f.name != Path(__file__).name:
            text = f.read_text()
            assert not [n for n in needles if n in text], f.name


@pytest.mark.skipif(GPU_HERE, reason="checks the behaviour on a machine without a GPU")
def test_without_a_gpu_every_gpu_test_skips_with_one_reason(gpu_selection):
    """On the collection `pytest -m gpu` runs (the check's runner itself, a pytest subprocess, is
    tested on small suites below: a skip fails its verdict)."""
    skips = [f"{i}: {r}" for i, r in gpu_selection.selected.items() if r is not None] + gpu_selection.collect_skips
    c = {"tests": len(gpu_selection.selected) + len(gpu_selection.collect_skips), "passed": 0, "failed": 0,
         "errors": 0, "skipped": len(skips), "failed_tests": [], "error_tests": [], "skip_reasons": skips}
    assert c["tests"] > 0 and c["skipped"] == c["tests"], c
    reasons = {s.split(": ", 1)[1].split(":")[0] for s in c["skip_reasons"]}
    assert reasons == {NO_GPU}, reasons
    problems, _ = gc.judge_test_run(0, c)
    assert any("skipped" in p for p in problems)  # the check's verdict: a skip fails


def test_skip_reasons_of_the_gpu_marker():
    assert gpu_skip_reason(1, (0, "torch.cuda.is_available() is False")).startswith(NO_GPU)
    assert gpu_skip_reason(2, (1, "")) == f"needs 2 {FEWER_DEVICES} 1"
    assert gpu_skip_reason(2, (2, "")) is None and gpu_skip_reason(1, (1, "")) is None


# ---- the verdict on a pytest run -----------------------------------------------------------------
GPU_MARK = "pytest.mark.gpu"


def _run(tmp_path, body: str, timeout=120) -> dict:
    tests = tmp_path / "tests"
    tests.mkdir(exist_ok=True)
    (tests / "test_it.py").write_text(textwrap.dedent(body))
    return gc.run_gpu_tests(tests, tmp_path / "out", timeout=timeout)


def test_runner_passes_a_passing_gpu_test_and_runs_nothing_else(tmp_path):
    r = _run(tmp_path, f"""
        import pytest
        @{GPU_MARK}
        def test_ok():
            assert 1 + 1 == 2
        def test_cpu_only_deselected():
            raise AssertionError("must not run")
        """)
    assert r["ok"], r
    assert r["rc"] == 0 and r["counts"]["passed"] == 1 and r["counts"]["tests"] == 1
    assert Path(r["results"]).is_file() and Path(r["log"]).is_file() and r["seconds"] >= 0


def test_runner_fails_a_skipped_gpu_test_but_lists_one_needing_more_gpus(tmp_path):
    r = _run(tmp_path, f"""
        import pytest
        @{GPU_MARK}
        def test_ok():
            pass
        @{GPU_MARK}
        @pytest.mark.skip(reason="needs 2 {FEWER_DEVICES} 1")
        def test_two_gpus():
            pass
        @{GPU_MARK}
        @pytest.mark.skipif(True, reason="needs g++")
        def test_skipped():
            pass
        """)
    assert r["rc"] == 0  # pytest itself is happy with a skip: the check is not
    assert not r["ok"] and r["counts"]["skipped"] == 2
    assert len(r["problems"]) == 1 and "1 GPU test(s) skipped" in r["problems"][0] and "needs g++" in r["problems"][0]
    assert len(r["needs_more_gpus"]) == 1 and "test_two_gpus" in r["needs_more_gpus"][0]


def test_runner_fails_a_run_that_collects_no_gpu_test(tmp_path):
    r = _run(tmp_path, "def test_cpu():\n    pass\n")
    assert r["rc"] == 5 and not r["ok"]
    assert any("collected no GPU test" in p for p in r["problems"]), r["problems"]


def test_runner_fails_an_import_error(tmp_path):
    r = _run(tmp_path, f"import pytest\nimport lsm_gnn_module_that_does_not_exist\n@{GPU_MARK}\ndef test_ok():\n    pass\n")
    assert not r["ok"] and r["rc"] == 2
    assert "collection or import error" in " ".join(r["problems"]), r["problems"]


def test_runner_fails_a_failing_test_and_names_it(tmp_path):
    r = _run(tmp_path, f"import pytest\n@{GPU_MARK}\ndef test_wrong():\n    assert 1 == 2\n")
    assert not r["ok"] and r["counts"]["failed"] == 1
    assert any("test_wrong" in p for p in r["problems"])


def test_runner_kills_a_run_past_its_limit_and_keeps_the_tests_that_finished(tmp_path):
    r = _run(tmp_path, f"""
        import pytest, time
        @{GPU_MARK}
        def test_fast():
            pass
        @{GPU_MARK}
        def test_wrong():
            assert 1 == 2
        @{GPU_MARK}
        def test_slow():
            time.sleep(120)
        @{GPU_MARK}
        def test_never_reached():
            pass
        """, timeout=12)
    assert r["timed_out"] and not r["ok"]
    c = r["counts"]
    assert (c["passed"], c["failed"], c["tests"]) == (1, 1, 2), c
    assert c["running"].endswith("test_it.py::test_slow")
    assert any("timed out after 12 s while" in p and "test_slow" in p for p in r["problems"]), r["problems"]
    assert any("test_wrong" in p for p in r["problems"])


def test_runner_accepts_a_module_skipped_for_a_missing_optional_package_only(tmp_path):
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test_needs_dgl.py").write_text(
        "import pytest\npytest.importorskip('lsm_gnn_no_such_module')\n")
    (tests / "test_gpu.py").write_text(f"import pytest\n@{GPU_MARK}\ndef test_ok():\n    pass\n")
    r = gc.run_gpu_tests(tests, tmp_path / "out", timeout=120)
    assert not r["ok"] and r["counts"]["passed"] == 1, r
    assert any("1 test module(s) skipped while collecting" in p for p in r["problems"]), r["problems"]
    counts = {**r["counts"], "skipped_modules": [
        m.replace("lsm_gnn_no_such_module", gc.OPTIONAL_TEST_PACKAGES[0]) for m in r["counts"]["skipped_modules"]]}
    assert gc.judge_test_run(0, counts) == ([], [])


def test_the_tests_time_limit_follows_the_budget(tmp_path, monkeypatch):
    seen = []

    def fake_run(tests_dir, out_dir, timeout, selection=("-m", "gpu")):
        seen.append((timeout, Path(out_dir)))
        return {"ok": True, "problems": [], "needs_more_gpus": [], "seconds": 0.0, "counts": {}}

    monkeypatch.setattr(gc, "run_gpu_tests", fake_run)
    (tmp_path / "tests").mkdir()
    for budget in (285, 440, 1000):
        gc.Check(tmp_path / "out", budget=budget, tests_dir=tmp_path / "tests", logs=tmp_path / "logs").tests()
    assert [round(t) for t, _ in seen] == [round(gc.TESTS_SHARE * b) for b in (285, 440, 1000)]
    assert all(d == tmp_path / "logs" for _, d in seen)  # the logs' folder, not --out


def test_judge_verdicts():
    ok = {"tests": 3, "passed": 3, "failed": 0, "errors": 0, "skipped": 0,
          "failed_tests": [], "error_tests": [], "skip_reasons": []}
    assert gc.judge_test_run(0, ok) == ([], [])
    assert gc.judge_test_run(5, {**ok, "tests": 0, "passed": 0})[0]
    assert any("pytest is not installed" in p for p in gc.judge_test_run(1, None, log_tail="No module named pytest")[0])
    assert gc.judge_test_run(1, None)[0]                          # no results at all
    assert gc.judge_test_run(0, ok, timed_out=True, timeout=5)[0]
    assert gc.judge_test_run(1, {**ok, "failed": 1, "passed": 2, "failed_tests": ["t::x: boom"]})[0]


def test_results_counts_reads_the_plugins_lines_and_the_test_a_kill_interrupted(tmp_path):
    ev = [{"event": "collect", "nodeid": "tests/test_m.py", "outcome": "failed", "reason": "ImportError: x\nmore"},
          {"event": "collect", "nodeid": "tests/test_d.py", "outcome": "skipped", "reason": "could not import 'dgl'"}]
    for name, phases in {"a": [("setup", "passed"), ("call", "passed"), ("teardown", "passed")],
                         "b": [("setup", "skipped"), ("teardown", "passed")],
                         "c": [("setup", "passed"), ("call", "failed"), ("teardown", "passed")],
                         "d": [("setup", "failed"), ("teardown", "passed")],
                         "e": [("setup", "passed"), ("call", "passed"), ("teardown", "failed")],
                         "f": [("setup", "passed")]}.items():
        ev.append({"event": "start", "nodeid": f"t::{name}"})
        ev += [{"event": "report", "nodeid": f"t::{name}", "when": w, "outcome": o, "duration": 0.5,
                "reason": f"{name}-{w}"} for w, o in phases]
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join(json.dumps(e) for e in ev) + '\n{"event": "rep')  # the last line cut by a kill
    c = gc.results_counts(path)
    assert (c["tests"], c["passed"], c["skipped"], c["failed"], c["errors"]) == (5, 1, 1, 1, 3), c
    assert c["running"] == "t::f" and c["durations_s"]["t::a"] == 1.5
    assert c["error_tests"][0] == "tests/test_m.py: ImportError: x" and c["skipped_modules"] == ["tests/test_d.py: could not import 'dgl'"]
    assert c["skip_reasons"] == ["t::b: b-setup"] and c["failed_tests"] == ["t::c: c-call"]
    assert gc.results_counts(tmp_path / "missing.jsonl") is None


# ---- the steps -------------------------------------------------------------------------------------
def test_every_step_function_takes_the_checks_arguments_in_both_modes(tmp_path):
    for name, s in gc.STEPS.items():
        module, attr = s.target.split(":")
        fn = getattr(importlib.import_module(module), attr)
        for mode in ("full", "quick"):
            kwargs = {**s.kwargs[mode], **s.extra}
            kwargs.update({"accelerator": {"out_dir": "x"}, "dataset": {"root": "x"}}.get(name, {}))
            if s.dataset:
                kwargs["dataset"] = "x"
            inspect.signature(fn).bind(**kwargs)
        assert set(s.limit_s) == {"full", "quick"}
    assert sum(s.limit_s["quick"] for s in gc.STEPS.values()) > 0
    for fname, (step, op, value) in gc.TARGETS.items():
        assert step in gc.STEPS and op in (">=", "<=") and value > 0


def test_a_step_whose_module_did_not_import_in_the_env_step_is_not_started_and_says_why(tmp_path, monkeypatch):
    monkeypatch.setattr(gc, "run_step", lambda *a, **k: pytest.fail("a step was started"))
    check = gc.Check(tmp_path / "out", skip=[n for n in gc.STEPS if n not in ("engine", "gather")])
    check.report["environment"]["imports"] = {
        "lsm_gnn.bench.cache": "Traceback ...\nModuleNotFoundError: No module named 'jsonschema'\n"}
    monkeypatch.setattr(gc, "missing_modules", lambda names: [])
    check.steps()
    for name in ("engine", "gather"):  # both in lsm_gnn/bench/cache.py
        err = check.report["benchmarks"][name]["error"]
        assert "lsm_gnn.bench.cache does not import here: ModuleNotFoundError: No module named 'jsonschema'" in err
        assert any(u["what"] == name for u in check.report["unverified"])


def test_a_step_runs_in_its_own_process_and_reports_its_duration(tmp_path):
    res = gc.run_step("accelerator", gc.STEPS["accelerator"].target,
                      dict(device="cpu", batch_sizes=[4, 8], hidden=4, feature_dim=8, warmup=1, repeats=1,
                           out_dir=str(tmp_path)), 300, tmp_path / "steps")
    assert "error" not in res, res
    assert res["seconds"] > 0 and Path(res["profile_path"]).is_file() and set(res["step"]) == {"fixed_s", "row_s", "edge_s"}
    bad = gc.run_step("bad", "lsm_gnn.bench.cache:no_such_function", {}, 60, tmp_path / "steps")
    assert "AttributeError" in bad["error"] and Path(bad["log"]).is_file()


@pytest.mark.slow
def test_the_dataset_train_and_multidevice_steps_run_on_the_cpu(tmp_path):
    """The plumbing of the steps that train (device="cpu" here; the check passes "cuda")."""
    from lsm_gnn.bench.multidevice import two_ranks_one_gpu
    from lsm_gnn.bench.train import on_device

    ds = gc.make_dataset(str(tmp_path / "ds"), nodes=6000, feature_dim=16)
    assert "error" not in ds and ds["nodes"] == 6000
    tr = on_device(ds["path"], device="cpu", warmup=1, timed=2, threads=1)
    assert tr["device"] == "cpu" and tr["steady_epoch_vs_memory"] > 0 and tr["reader"] in ("direct", "buffered")
    # train_in_memory and train_gpu_engine's plumbing: a reader and more overrides reach both runs
    mem = on_device(ds["path"], device="cpu", warmup=1, timed=2, threads=1, reader="memory", sets=["cache.window=4"])
    assert mem["reader"] == "memory" and mem["sets"] == ["cache.window=4"] and mem["steady_epoch_vs_memory"] > 0
    assert mem["argv"][-2:] == ["--set", "cache.window=4"] and "cache.window=4" in mem["bench"]["overrides"]
    md = two_ranks_one_gpu(ds["path"], warmup=1, timed=2, device="cpu")
    assert "error" not in md, md.get("error")
    assert md["status"] == "complete" and md["backend"] == "gloo" and md["devices"] == 2


def test_atomic_json(tmp_path):
    gc.write_json_atomic(tmp_path / "a" / "x.json", {"v": 1.5})
    assert json.loads((tmp_path / "a" / "x.json").read_text()) == {"v": 1.5}
    assert [p.name for p in (tmp_path / "a").iterdir()] == ["x.json"]


# ---- the whole check, without a GPU -------------------------------------------------------------------
@pytest.mark.skipif(GPU_HERE, reason="checks the behaviour on a machine without a GPU")
def test_without_a_gpu_the_check_says_so_and_exits_2(tmp_path):
    out = tmp_path / "out"
    p = subprocess.run(CLI + ["check", "gpu", "--out", str(out), "--quick"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=180)
    assert p.returncode == 2, p.stdout + p.stderr
    assert f"no GPU: {NO_GPU}" in p.stderr
    rep = json.loads((out / "gpu_check.json").read_text())
    assert rep["ok"] is False and rep["exit_status"] == 2 and rep["complete"] is True
    assert rep["error"].startswith("no GPU")
    assert {u["what"] for u in rep["unverified"]} >= {"tests", *gc.STEPS}
    assert rep["versions"]["python"] and "torch" in rep["versions"] and rep["durations_s"]["env"] > 0
    # the steps' modules import here, GPU or not (a module the GPU machine lacks would show)
    assert rep["environment"]["imports"] == {s.target.split(":")[0]: "ok" for s in gc.STEPS.values()}
    for key in ("ok", "tests", "benchmarks", "targets", "elapsed_s", "versions", "unverified"):
        assert key in rep
