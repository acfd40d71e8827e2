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
    budgets = (100, gc.BUDGET_S["full"], 1000)
    for budget in budgets:
        gc.Check(tmp_path / "out", budget=budget, tests_dir=tmp_path / "tests", logs=tmp_path / "logs").tests()
    # its own limit, or a share of a budget cut below the plan
    assert [round(t) for t, _ in seen] == [round(min(gc.TESTS_LIMIT_S["full"], gc.TESTS_SHARE * b)) for b in budgets]
    assert round(seen[0][0]) == round(gc.TESTS_SHARE * 100) and round(seen[2][0]) == gc.TESTS_LIMIT_S["full"]
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
        assert set(gc.target_steps(fname)) <= set(gc.STEPS) and op in (">=", "<=") and value >= 0
        assert fname in gc.TARGET_VALUES


def test_a_step_whose_module_did_not_import_in_the_env_step_is_not_started_and_says_why(tmp_path, monkeypatch):
    monkeypatch.setattr(gc, "run_step", lambda *a, **k: pytest.fail("a step was started"))
    check = gc.Check(tmp_path / "out", skip=[n for n in gc.STEPS if n not in ("engine_sweep", "zero_copy_gather")])
    check.report["environment"]["imports"] = {
        "lsm_gnn.bench.cache": "Traceback ...\nModuleNotFoundError: No module named 'jsonschema'\n"}
    monkeypatch.setattr(gc, "missing_modules", lambda names: [])
    check.steps()
    for name in ("engine_sweep", "zero_copy_gather"):  # both in lsm_gnn/bench/cache.py
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


# ---- the targets (issue 44), each computed from the steps' outputs ------------------------------------
def _point(requests, gpu_ms, ratio, syncs=0, pvp=True):
    return {"batch": int(requests * 1.23), "policy": "hybrid_pvp" if pvp else "hybrid", "pvp": pvp,
            "requests_per_batch": float(requests), "gpu_ms_per_batch": gpu_ms, "cpu_ms_per_batch": gpu_ms * ratio,
            "gpu_vs_cpu_requests_ratio": ratio, "engine_host_syncs_per_step": syncs,
            "engine_graph_step_fraction": 1.0, "engine_graph_error": None, "counts_equal": True}


def _outputs(**change) -> dict:
    """A fabricated output of every step (the fields the steps write; numbers chosen so each target
    is met: the engine a line of 0.08 ms + 1 ns a request)."""
    out = {
        "engine_sweep": {"policy": "hybrid", "pvp": True, "counts_equal": True,
                         "points": [_point(r, 0.08 + r * 1e-6, ratio) for r, ratio in
                                    ((21_000, 12.0), (81_000, 55.0), (315_000, 90.0))]},
        "zero_copy_gather": {"rows": 21_000, "row_bytes": 4096, "gather_ms": 2.0, "memcpy_ms": 1.8,
                             "gather_gb_per_s": 43.0, "memcpy_gb_per_s": 47.8, "gather_correct": True},
        "dataset": {"nodes": 150_000},
        "train_in_memory": {"reader": "memory", "lsm_epoch_steady_s": 1.2, "memory_epoch_steady_s": 1.0,
                            "hidden_fetch_fraction": 0.75},
        "train": {"reader": "direct", "lsm_storage_bytes_per_iter": 2000 * 4096.0,
                  "bench": {"systems": {"lsm": {"per_iteration": {"fetch_storage": 0.01},
                                                "storage_path": {"reader": "direct", "block_size": 4096}}}}},
        "disk_probe": {"iops": 210_000.0, "probe": "native"},
    }
    out.update(change)
    return out


def _values(outputs: dict) -> dict:
    return {f: gc.compute_target(f, outputs)["value"] for f in gc.TARGETS}


def test_the_targets_are_the_issues_names_and_each_is_computed_from_a_fabricated_step_output():
    assert list(gc.TARGETS) == ["engine_fixed_ms", "gpu_vs_cpu_requests_ratio", "engine_host_syncs_per_step",
                                "zero_copy_gather_vs_memcpy", "no_disk_epoch_vs_ideal", "fetch_hidden_fraction",
                                "disk_achieved_vs_probe"]
    v = _values(_outputs())
    assert v["engine_fixed_ms"] == pytest.approx(0.08)
    assert v["gpu_vs_cpu_requests_ratio"] == 55.0 and v["engine_host_syncs_per_step"] == 0
    assert v["zero_copy_gather_vs_memcpy"] == pytest.approx(0.9)
    assert v["no_disk_epoch_vs_ideal"] == pytest.approx(1.2) and v["fetch_hidden_fraction"] == 0.75
    assert v["disk_achieved_vs_probe"] == pytest.approx(200_000 / 210_000)   # 2000 blocks in 10 ms
    assert all(gc.compute_target(f, _outputs())["met"] for f in gc.TARGETS)
    # each follows its inputs (none is a constant), and a value past its target is missed
    slower = _outputs(zero_copy_gather={"gather_ms": 4.0, "memcpy_ms": 1.8},
                      train_in_memory={"reader": "memory", "lsm_epoch_steady_s": 8.4, "memory_epoch_steady_s": 1.0,
                                       "hidden_fetch_fraction": 0.1},
                      disk_probe={"iops": 400_000.0})
    slower["engine_sweep"]["points"] = [_point(r, 0.8 + r * 1e-6, 12.5, syncs=3) for r in (21_000, 81_000, 315_000)]
    w = _values(slower)
    assert w == pytest.approx({"engine_fixed_ms": 0.8, "gpu_vs_cpu_requests_ratio": 12.5, "engine_host_syncs_per_step": 3,
                               "zero_copy_gather_vs_memcpy": 0.45, "no_disk_epoch_vs_ideal": 8.4,
                               "fetch_hidden_fraction": 0.1, "disk_achieved_vs_probe": 0.5})
    assert not any(gc.compute_target(f, slower)["met"] for f in gc.TARGETS)


def test_the_engines_fixed_time_is_the_intercept_of_a_line_fitted_to_the_sweeps_times_against_requests():
    fit = gc.line_fit([1, 2, 3, 4], [2.5, 4.5, 6.5, 8.5])
    assert fit["intercept"] == pytest.approx(0.5) and fit["slope"] == pytest.approx(2.0)
    assert fit["max_abs_residual"] == pytest.approx(0.0, abs=1e-12)
    noisy = gc.line_fit([0, 1, 2], [1.0, 2.2, 2.8])  # least squares, not the first point
    assert noisy["slope"] == pytest.approx(0.9) and noisy["intercept"] == pytest.approx(1.1)
    t = gc.compute_target("engine_fixed_ms", _outputs())
    assert t["from"]["per_request_ns"] == pytest.approx(1.0) and len(t["from"]["points"]) == 3
    one = _outputs(engine_sweep={"points": [_point(81_000, 0.9, 12.0)]})
    t = gc.compute_target("engine_fixed_ms", one)
    assert t["value"] is None and t["met"] is None and "2 or more points" in t["why"]
    with pytest.raises(gc.MissingOutput):
        gc.line_fit([5, 5], [1.0, 2.0])


def test_the_engines_ratio_is_read_at_the_pvp_point_nearest_81k_requests_and_none_outside_25_percent():
    pts = [_point(81_000, 0.9, 12.0, pvp=False), _point(70_000, 0.9, 20.0), _point(95_000, 0.9, 30.0)]
    t = gc.compute_target("gpu_vs_cpu_requests_ratio", _outputs(engine_sweep={"points": pts}))
    assert t["value"] == 20.0 and t["from"]["requests_per_batch"] == 70_000   # PVP only, the nearest
    far = [_point(21_000, 0.8, 3.6), _point(315_000, 1.1, 51.0)]
    t = gc.compute_target("gpu_vs_cpu_requests_ratio", _outputs(engine_sweep={"points": far}))
    assert t["value"] is None and "81,000 requests" in t["why"]


def test_a_target_whose_step_did_not_run_failed_or_lacks_its_field_is_null_with_why():
    outputs = _outputs()
    del outputs["zero_copy_gather"]
    outputs["disk_probe"] = {"error": "not run: the check's time budget was spent (3 s left)"}
    outputs["train_in_memory"] = {"skipped": "--skip"}
    outputs["engine_sweep"]["points"][1].pop("engine_host_syncs_per_step")
    t = {f: gc.compute_target(f, outputs) for f in gc.TARGETS}
    assert t["zero_copy_gather_vs_memcpy"]["why"] == "step zero_copy_gather did not run"
    assert t["disk_achieved_vs_probe"]["why"].startswith("step disk_probe failed: not run: the check's time budget")
    assert t["disk_achieved_vs_probe"]["step"] == ["train", "disk_probe"]
    assert t["no_disk_epoch_vs_ideal"]["why"] == t["fetch_hidden_fraction"]["why"] == "step train_in_memory was skipped (--skip)"
    assert "no engine_host_syncs_per_step" in t["engine_host_syncs_per_step"]["why"]
    for f in ("zero_copy_gather_vs_memcpy", "disk_achieved_vs_probe", "no_disk_epoch_vs_ideal",
              "engine_host_syncs_per_step"):
        assert t[f]["value"] is None and t[f]["met"] is None
    assert t["engine_fixed_ms"]["value"] == pytest.approx(0.08)   # the others still computed
    # the no-disk targets need a run from host memory, the disk target a run from the disk
    mem, disk = _outputs()["train_in_memory"], _outputs()["train"]
    swapped = _outputs(train_in_memory={**mem, "reader": "direct"}, train={**disk, "reader": "memory"})
    assert "read a disk" in gc.compute_target("no_disk_epoch_vs_ideal", swapped)["why"]
    assert "not the disk" in gc.compute_target("disk_achieved_vs_probe", swapped)["why"]


def test_the_check_reports_every_target_by_name_and_a_missed_one_exits_3(tmp_path):
    def finished(outputs):
        check = gc.Check(tmp_path / "out", skip_tests=True)
        check.report["benchmarks"] = outputs
        return check.finish(), json.loads((tmp_path / "out" / "gpu_check.json").read_text())

    code, rep = finished(_outputs())
    assert code == 0 and list(rep["targets"]) == list(gc.TARGETS) and rep["all_targets_met"]
    assert rep["targets"]["disk_achieved_vs_probe"]["from"]["achieved_iops"] == pytest.approx(200_000)
    code, rep = finished(_outputs(zero_copy_gather={"gather_ms": 4.0, "memcpy_ms": 1.8}))
    assert code == 3 and rep["targets"]["zero_copy_gather_vs_memcpy"]["met"] is False
    outputs = _outputs(disk_probe={"error": "no probe ran: fio: not found; native: no O_DIRECT"})
    code, rep = finished(outputs)
    assert code == 1 and rep["targets"]["disk_achieved_vs_probe"]["value"] is None
    assert any(u["what"] == "target disk_achieved_vs_probe >= 0.9" and "no probe ran" in u["why"]
               for u in rep["unverified"])


def test_the_committed_h200_calls_give_the_figures_issue_44_quotes():
    """reports/gpu/: the engine's fixed time 0.73-0.85 ms a batch, 8.4x without a disk, 10 % hidden."""
    def outputs(call):
        return json.loads((REPO / "reports" / "gpu" / call / "gpu_check.json").read_text())["benchmarks"]

    second, third = outputs("2026-12-04-h200-2"), outputs("2026-12-04-h200-3")
    assert gc.compute_target("engine_fixed_ms", second)["value"] == pytest.approx(0.73, abs=0.01)
    assert gc.compute_target("engine_fixed_ms", third)["value"] == pytest.approx(0.85, abs=0.01)
    assert 11 < gc.compute_target("gpu_vs_cpu_requests_ratio", second)["value"] < 13
    assert gc.compute_target("no_disk_epoch_vs_ideal", second)["value"] == pytest.approx(8.43, abs=0.01)
    assert gc.compute_target("fetch_hidden_fraction", second)["value"] == pytest.approx(0.10, abs=0.01)
    assert "time budget was spent" in gc.compute_target("no_disk_epoch_vs_ideal", third)["why"]


def _script_numbers() -> dict:
    import re

    text = (REPO / "tools" / "gpu-check.sh").read_text()
    caps = {n: int(v) for n, v in re.findall(r'step (install-carry|install-project) "\$\(lim (\d+)\)"', text)}
    return {"budget": int(re.search(r"GPU_CHECK_BUDGET:-(\d+)", text).group(1)),
            "pack": int(re.search(r"^PACK_S=(\d+)", text, re.M).group(1)), "install": caps,
            "check_slack": int(re.search(r"timeout -k (\d+) \$\(\( CHECK_BUDGET \+ (\d+) \)\)", text).group(2))}


def test_the_checks_limits_with_install_and_packing_sum_under_300_s_and_fit_the_scripts_default_budget():
    """Under 5 minutes a call, so a rerun fits the 15 minutes of device time a task is lent: every
    step's limit, the tests', the env step's, the install caps and the packing reserve."""
    s = _script_numbers()
    assert set(s["install"]) == {"install-carry", "install-project"}
    for mode in ("full", "quick"):
        plan = gc.ENV_LIMIT_S + gc.TESTS_LIMIT_S[mode] + sum(st.limit_s[mode] for st in gc.STEPS.values())
        assert gc.BUDGET_S[mode] == plan
    worst = sum(s["install"].values()) + s["pack"] + gc.BUDGET_S["full"]
    assert worst < 300, worst
    # the script's default budget holds the full plan after the install took up to 25 s (2-4 s on
    # the H200 calls), and the check's own kill (its budget + slack + 5 s) ends the call under 300 s
    assert gc.BUDGET_S["full"] + s["pack"] + 25 <= s["budget"] < 300
    assert s["budget"] - s["pack"] + s["check_slack"] + 5 < 300
    # the tests' limit covers the slowest H200 call's GPU tests (74.3 s, reports/gpu/2026-12-04-h200-3)
    assert gc.TESTS_LIMIT_S["full"] >= 74.3 * 1.1
