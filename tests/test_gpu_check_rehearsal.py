"""The GPU call rehearsed here: tools/gpu-check.sh, the script a GPU machine runs, on an environment
of only that machine's packages (tools/gpu_image_env.py: no dgl, pydantic or jsonschema, no
network) with the carried wheels built for this Python (`make gpu-carry PYVER=3.11
CARRY=.gpu-carry-py311`, a prerequisite of `make test`: the tests download nothing). It installs
them and the project offline, collects the GPU tests, imports every step's module, stops at the
first thing that needs a GPU with exit 2 and "no GPU", and leaves at most 8 files. The carried
folder for the GPU machine (cp312, `make gpu-carry`) is complete and fits a call with the tree."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from lsm_gnn.check import gpu as gc

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))
import gpu_carry  # noqa: E402
import gpu_image_env  # noqa: E402

REHEARSAL_CARRY = REPO / ".gpu-carry-py311"
GPU_CARRY = REPO / ".gpu-carry"
MAX_FILES = 8  # what a device call brings back
PYVER = f"{sys.version_info.major}.{sys.version_info.minor}"


def _carried(folder: Path, pyver: str, make: str) -> Path:
    problems, _ = gpu_carry.check(folder, pyver, gpu_carry.wanted())
    if problems:
        pytest.fail(f"{folder}: {'; '.join(problems)}. Build it with `{make}` (make test does)")
    return folder


@pytest.fixture(scope="module")
def image_python(tmp_path_factory) -> Path:
    return gpu_image_env.build(tmp_path_factory.mktemp("gpu-image") / "venv")


def _script(python: Path, carry: Path, tmp: Path, budget: int = 240) -> dict:
    """tools/gpu-check.sh with `python` and `carry`, into tmp/out; its logs unpacked into tmp/logs."""
    out = tmp / "out"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "OUT", "GPU_CHECK_ARGS")}
    env.update(PYTHON=str(python), GPU_CARRY=str(carry), GPU_CHECK_BUDGET=str(budget), TMPDIR=str(tmp))
    t0 = time.perf_counter()
    p = subprocess.run(["bash", str(REPO / "tools" / "gpu-check.sh"), str(out)], cwd=tmp, env=env,
                       capture_output=True, text=True, timeout=300)
    seconds = time.perf_counter() - t0
    logs = tmp / "logs"
    if (out / "gpu-check-logs.tar.gz").is_file():
        with tarfile.open(out / "gpu-check-logs.tar.gz") as t:
            t.extractall(logs, filter="data")
    print(f"rehearsal: {seconds:.1f} s")
    return {"p": p, "out": out, "logs": logs / "logs", "seconds": seconds, "tmp": tmp}


@pytest.fixture(scope="module")
def rehearsal(image_python, tmp_path_factory) -> dict:
    carry = _carried(REHEARSAL_CARRY, PYVER, f"make gpu-carry PYVER={PYVER} CARRY=.gpu-carry-py311")
    return _script(image_python, carry, tmp_path_factory.mktemp("gpu-check"))


def test_the_rehearsal_environment_has_only_the_images_packages_and_no_network(image_python):
    code = """
import importlib.util, json, socket
absent = [m for m in ("dgl", "pydantic", "jsonschema", "snakemake", "asv", "cupy")
          if importlib.util.find_spec(m) is not None]
present = [m for m in ("numpy", "torch", "numba", "yaml", "click", "pytest", "tqdm", "psutil")
           if importlib.util.find_spec(m) is None]
try:
    socket.create_connection(("192.0.2.1", 443), timeout=1)
    refused = None
except OSError as e:
    refused = str(e)
print(json.dumps({"not_absent": absent, "not_present": present, "refused": refused}))
"""
    p = subprocess.run([str(image_python), "-c", code], capture_output=True, text=True, timeout=60,
                       env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, cwd="/")
    res = json.loads(p.stdout.strip().splitlines()[-1])
    assert res["not_absent"] == [] and res["not_present"] == [], res
    assert "no network on the GPU machine" in res["refused"]


def test_the_gpu_check_script_gets_to_the_gpu_and_stops_there_with_exit_2(rehearsal):
    p, out = rehearsal["p"], rehearsal["out"]
    text = p.stdout + p.stderr
    assert p.returncode == 2, text[-4000:]
    assert "no GPU" in p.stderr and "NO GPU (exit 2)" in p.stdout
    files = sorted(f.name for f in out.iterdir())
    assert len(files) <= MAX_FILES and all(f.is_file() for f in out.iterdir()), files
    assert set(files) == {"gpu_check.json", "gpu-check-script.json", "gpu-check-logs.tar.gz"}, files

    script = json.loads((out / "gpu-check-script.json").read_text())
    steps = {s["name"]: s for s in script["steps"]}
    assert list(steps) == ["install-carry", "install-project", "collect", "check"]
    assert [steps[s]["rc"] for s in steps] == [0, 0, 0, 2], steps
    assert script["exit_status"] == 2 and script["elapsed_s"] <= script["budget_s"]

    rep = json.loads((out / "gpu_check.json").read_text())
    assert rep["exit_status"] == 2 and rep["complete"] and rep["error"].startswith("no GPU")
    env = rep["environment"]
    # everything but the GPU is there: only CuPy (the GPU machine's own) is missing here
    assert env["missing_modules"] == ["cupy"], env
    assert env["imports"] == {s.target.split(":")[0]: "ok" for s in gc.STEPS.values()}, env["imports"]
    assert rep["versions"]["dgl"] is None
    # the steps imported the installed package (its CUDA sources as package data), not the checkout
    assert "package data" in env["kernel_sources"]
    assert rehearsal["seconds"] < 120


def test_the_gpu_tests_collect_there_without_dgl_and_only_dgl_modules_skip(rehearsal):
    logs = rehearsal["logs"]
    assert {"install-carry.log", "install-project.log", "collect.log", "check.log"} <= {f.name for f in logs.iterdir()}
    assert (logs / "check" / "steps" / "env.json").is_file()
    collect = (logs / "collect.log").read_text()
    summary = [ln for ln in collect.splitlines() if "collected" in ln][-1]
    assert "error" not in summary, collect[-3000:]
    selected = int(summary.split("/")[0])
    listed = [ln for ln in collect.splitlines() if ln.startswith("tests/") and "::" in ln]
    assert selected == len(listed) > 0
    skipped = sorted(ln.split("] ")[1].split(":")[0] for ln in collect.splitlines() if ln.startswith("SKIPPED"))
    assert skipped == sorted(f"tests/{f}" for f in _dgl_modules()), collect[-2000:]
    assert all("could not import 'dgl'" in ln for ln in collect.splitlines() if ln.startswith("SKIPPED"))


def _skips_without_dgl(node) -> bool:
    """`x = pytest.importorskip("dgl")` (or a dgl submodule) as a statement of the module."""
    v = getattr(node, "value", None)
    return (isinstance(node, (ast.Assign, ast.Expr)) and isinstance(v, ast.Call)
            and getattr(v.func, "attr", "") == "importorskip" and bool(v.args)
            and isinstance(v.args[0], ast.Constant) and str(v.args[0].value).split(".")[0] == "dgl")


def _dgl_modules() -> list[str]:
    """The test modules that need dgl to import (pytest.importorskip at module level)."""
    return sorted(f.name for f in (REPO / "tests").glob("test_*.py")
                  if any(_skips_without_dgl(n) for n in ast.parse(f.read_text()).body))


def test_no_test_module_imports_dgl_bare_and_no_gpu_test_lives_with_dgl():
    """dgl is optional for every GPU step: a module that needs it skips without it (never a collection
    error), and no GPU test sits in such a module (it would be skipped unseen on the GPU machine)."""
    for f in sorted((REPO / "tests").glob("*.py")):
        tree = ast.parse(f.read_text())
        bare = [n.lineno for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))
                and any((a.name if isinstance(n, ast.Import) else n.module or "").split(".")[0] == "dgl"
                        for a in (n.names if isinstance(n, ast.Import) else [n]))]
        assert not bare, f"{f.name}:{bare}: import dgl at module level (use pytest.importorskip('dgl'))"
    dgl_modules = _dgl_modules()
    assert dgl_modules, "no test module uses dgl: the rehearsal's skip check would test nothing"
    for name in dgl_modules:
        assert "mark.gpu" not in (REPO / "tests" / name).read_text(), name


def test_the_carried_folder_for_the_gpu_machine_is_complete_and_fits_one_call():
    folder = _carried(GPU_CARRY, "3.12", "make gpu-carry")
    _, facts = gpu_carry.check(folder, "3.12", gpu_carry.wanted())
    assert facts["carry_bytes"] + facts["tree_bytes"] < gpu_carry.LIMIT_MIB * 2**20
    # what the GPU path needs and the image lacks is carried
    names = {gpu_carry.wheel_name_version(Path(f))[0] for f in facts["files"]}
    assert {"pydantic", "pydantic-core", "jsonschema", "rpds-py"} <= names
    assert not names & {"dgl", "torch", "numpy", "cupy-cuda13x"}


def test_without_the_carried_wheels_every_step_still_runs_and_the_json_names_what_is_missing(image_python, tmp_path):
    """A step that fails does not stop the ones after it: no wheels, so the collection fails (the
    test modules need pydantic), and the check still runs, says "no GPU" and names the missing modules."""
    empty = tmp_path / "no-wheels"
    empty.mkdir()
    r = _script(image_python, empty, tmp_path)
    assert r["p"].returncode == 2, (r["p"].stdout + r["p"].stderr)[-3000:]
    steps = {s["name"]: s["rc"] for s in json.loads((r["out"] / "gpu-check-script.json").read_text())["steps"]}
    assert steps["install-carry"] != 0 and steps["collect"] != 0 and steps["check"] == 2, steps
    rep = json.loads((r["out"] / "gpu_check.json").read_text())
    assert {"pydantic", "jsonschema"} <= set(rep["environment"]["missing_modules"]), rep["environment"]
    imports = rep["environment"]["imports"]  # named before any GPU work (the steps that import them then do not run)
    assert "No module named 'pydantic'" in imports["lsm_gnn.accelerator.measure"]
    # the engine's steps read the metric vocabulary (lsm_gnn.metrics, a leaf), not the run record:
    # they import without any carried wheel
    assert imports["lsm_gnn.bench.cache"] == "ok", imports["lsm_gnn.bench.cache"]
    assert len(list(r["out"].iterdir())) <= MAX_FILES
