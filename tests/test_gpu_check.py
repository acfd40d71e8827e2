"""cuda/gpu_check.py on a machine without a GPU: the scan finds every expected GPU test file, the
test runner fails a skipped test, a file with no GPU test (pytest exit 5) and an import error,
and the check itself stops with a clear "no GPU" (exit 2 and a JSON that says so)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "cuda" / "gpu_check.py"
# marker text built from parts: this file holds no GPU test and must not look like one to the scan
GPU_MARK = "pytest.mark." + "gpu"


def _load():
    spec = importlib.util.spec_from_file_location("gpu_check_under_test", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


gc = _load()


def _gpu_here() -> bool:
    try:
        import torch

        if torch.cuda.is_available():
            return True
    except Exception:  # noqa: BLE001
        pass
    try:
        import cupy

        return bool(cupy.is_available())
    except Exception:  # noqa: BLE001
        return False


# ---- the scan ---------------------------------------------------------------------------------
def test_scan_finds_every_expected_gpu_test_file_that_exists():
    found = gc.scan_gpu_test_files()
    present = {rel for rel in gc.EXPECTED_GPU_TESTS if (REPO / rel).is_file()}
    assert {"tests/test_cache_gpu.py", "tests/test_storage_gpu.py", "tests/test_multidevice_owners.py"} <= present
    assert present <= set(found), present - set(found)
    # an expected file that is missing (renamed) is a problem; found ones are not
    problems = gc.check_expected(found)
    assert set(problems) == set(gc.EXPECTED_GPU_TESTS) - present
    # the renamed multi-device file is the one in the list, and the old name is gone
    assert "tests/test_multidevice_owners.py" in gc.EXPECTED_GPU_TESTS
    assert not any("test_dist_" in rel for rel in gc.EXPECTED_GPU_TESTS)
    assert "tests/test_gpu_check.py" not in found and "tests/test_gpu_imports.py" not in found


def test_scan_recognises_each_kind_of_gpu_marker(tmp_path):
    files = {
        "test_a.py": "from conftest import requires_gpu\n@requires_gpu\ndef test_x(): pass\n",
        "test_b.py": f"import pytest\n@{GPU_MARK}\ndef test_x(): pass\n",
        "test_c.py": "import pytest\nB = [pytest.param('cu' 'py'), pytest.param(\"cupy\")]\n",
        "test_d.py": "import pytest\n@pytest.fixture(params=['cpu', 'cuda'])\ndef dev(request): return request.param\n",
        "test_e.py": "import pytest, torch\n@pytest.mark.skipif(not torch.cuda.is_available(), reason='x')\n"
                     "def test_x(): pass\n",
        "test_f.py": "import torch\ndef test_x():\n    if not torch.cuda.is_available():\n        pass\n",
        "test_g.py": "def test_plain(): pass\n",
        "helper.py": f"import pytest\n@{GPU_MARK}\ndef test_x(): pass\n",
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    found = {Path(p).name: m for p, m in gc.scan_gpu_test_files(tmp_path).items()}
    assert set(found) == {"test_a.py", "test_b.py", "test_c.py", "test_d.py", "test_e.py"}
    assert found["test_a.py"] == ["requires_gpu"]


def test_check_expected_names_a_renamed_file():
    expected = {"tests/test_renamed_away.py": ["-m", "gpu"], "tests/test_cache_gpu.py": ["-m", "gpu"]}
    problems = gc.check_expected(gc.scan_gpu_test_files(), expected)
    assert list(problems) == ["tests/test_renamed_away.py"]
    assert "does not exist" in problems["tests/test_renamed_away.py"]


# ---- the runner and its verdicts ----------------------------------------------------------------
def _run(tmp_path, name: str, body: str, selection=("-m", "gpu")) -> dict:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return gc.run_test_file(path, list(selection), tmp_path / "out", timeout=120)


def test_runner_passes_a_passing_gpu_test(tmp_path):
    r = _run(tmp_path, "test_pass.py", f"""
        import pytest
        @{GPU_MARK}
        def test_ok():
            assert 1 + 1 == 2
        def test_cpu_only_deselected():
            raise AssertionError("must not run")
        """)
    assert r["ok"], r
    assert r["rc"] == 0 and r["counts"]["passed"] == 1 and r["counts"]["tests"] == 1
    assert Path(r["junit"]).is_file() and Path(r["log"]).is_file()


def test_runner_fails_a_skipped_gpu_test(tmp_path):
    r = _run(tmp_path, "test_skip.py", f"""
        import pytest
        @{GPU_MARK}
        def test_ok():
            pass
        @{GPU_MARK}
        @pytest.mark.skipif(True, reason="needs a CUDA GPU (none here)")
        def test_skipped():
            pass
        """)
    assert r["rc"] == 0  # pytest itself is happy with a skip: the check is not
    assert not r["ok"]
    assert r["counts"]["skipped"] == 1
    assert any("skipped" in p and "needs a CUDA GPU" in p for p in r["problems"]), r["problems"]


def test_runner_fails_a_file_that_collects_no_gpu_test(tmp_path):
    r = _run(tmp_path, "test_none.py", """
        def test_cpu():
            pass
        """)
    assert r["rc"] == 5
    assert not r["ok"]
    assert any("collected no GPU test" in p for p in r["problems"]), r["problems"]


def test_runner_fails_an_import_error(tmp_path):
    r = _run(tmp_path, "test_broken.py", f"""
        import pytest
        import lsm_gnn_module_that_does_not_exist
        @{GPU_MARK}
        def test_ok():
            pass
        """)
    assert not r["ok"]
    assert r["rc"] == 2
    text = " ".join(r["problems"])
    assert "collection or import error" in text and "error" in text, r["problems"]


def test_runner_fails_a_failing_test_and_names_it(tmp_path):
    r = _run(tmp_path, "test_fail.py", f"""
        import pytest
        @{GPU_MARK}
        def test_wrong():
            assert 1 == 2
        """)
    assert not r["ok"] and r["counts"]["failed"] == 1
    assert any("test_wrong" in p for p in r["problems"])


def test_runner_kills_a_test_that_runs_past_its_limit(tmp_path):
    path = tmp_path / "test_slow.py"
    path.write_text(f"import pytest, time\n@{GPU_MARK}\ndef test_slow():\n    time.sleep(60)\n")
    r = gc.run_test_file(path, ["-m", "gpu"], tmp_path / "out", timeout=3)
    assert r["timed_out"] and not r["ok"]
    assert any("timed out" in p for p in r["problems"])


def test_judge_verdicts():
    ok = {"tests": 3, "passed": 3, "failed": 0, "errors": 0, "skipped": 0,
          "failed_tests": [], "error_tests": [], "skip_reasons": []}
    assert gc.judge_test_run(0, ok) == []
    assert gc.judge_test_run(5, {**ok, "tests": 0, "passed": 0})
    assert any("pytest is not installed" in p for p in gc.judge_test_run(1, None, log_tail="No module named pytest"))
    assert gc.judge_test_run(1, None)                          # no JUnit XML at all
    assert gc.judge_test_run(0, ok, timed_out=True, timeout=5)
    assert gc.judge_test_run(1, {**ok, "failed": 1, "passed": 2, "failed_tests": ["t::x: boom"]})


def test_junit_counts_reads_pytest_xml(tmp_path):
    xml = tmp_path / "r.xml"
    xml.write_text('<?xml version="1.0"?><testsuites><testsuite name="pytest" tests="4">'
                   '<testcase classname="m" name="a"/>'
                   '<testcase classname="m" name="b"><skipped message="no gpu"/></testcase>'
                   '<testcase classname="m" name="c"><failure message="boom"/></testcase>'
                   '<testcase classname="" name="m"><error message="collection failure"/></testcase>'
                   '</testsuite></testsuites>')
    c = gc.junit_counts(xml)
    assert (c["tests"], c["passed"], c["skipped"], c["failed"], c["errors"]) == (4, 1, 1, 1, 1)
    assert gc.junit_counts(tmp_path / "missing.xml") is None


def test_targets_and_steps_are_consistent():
    assert set(gc.TARGETS) == {"gpu_vs_cpu_requests_ratio", "gpu_gather_vs_copy_bw", "steady_epoch_vs_memory"}
    for field, (step, op, value) in gc.TARGETS.items():
        assert step in gc.STEPS and op in (">=", "<=") and value > 0
    assert set(gc.BENCH_STEPS) <= set(gc.STEPS)
    for mode in ("full", "quick"):
        assert set(gc.STEP_LIMIT_S[mode]) == {"env", *gc.BENCH_STEPS}


def test_atomic_json(tmp_path):
    gc.write_json_atomic(tmp_path / "a" / "x.json", {"v": 1.5})
    assert json.loads((tmp_path / "a" / "x.json").read_text()) == {"v": 1.5}
    assert [p.name for p in (tmp_path / "a").iterdir()] == ["x.json"]


# ---- the whole check, without a GPU ---------------------------------------------------------------
@pytest.mark.skipif(_gpu_here(), reason="checks the behaviour on a machine without a GPU")
def test_without_a_gpu_the_check_says_so_and_fails(tmp_path):
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, str(SCRIPT), "--out", str(out), "--quick"], cwd=REPO,
                       capture_output=True, text=True, timeout=180)
    assert p.returncode == 2, p.stdout + p.stderr
    assert "no GPU" in p.stderr
    rep = json.loads((out / "gpu_check.json").read_text())
    assert rep["ok"] is False and rep["exit_status"] == 2 and rep["complete"] is True
    assert rep["error"].startswith("no GPU")
    assert {u["what"] for u in rep["unverified"]} >= {"tests", "engine", "gather", "train", "multidevice"}
    assert rep["versions"]["python"] and "torch" in rep["versions"]
    for key in ("ok", "tests", "benchmarks", "targets", "elapsed_s", "versions", "unverified"):
        assert key in rep
