"""The CUDA sources ship inside the package (lsm_gnn.kernels, from cuda/): a wheel built from a clean
checkout holds every one, and installed outside the checkout it loads each and compiles every
program the engines build, through the CPU stand-in (tests/cuda_emu.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import zipfile
from pathlib import Path

import pytest

from lsm_gnn.check.nvrtc import translation_units
from lsm_gnn.utils import cuda_sources

REPO = Path(__file__).resolve().parents[1]
_has_cxx = bool(shutil.which("g++") or shutil.which("c++"))


def checkout_sources() -> list[str]:
    """Every .cu / .cuh under cuda/, found without the package's loader."""
    cuda = REPO / "cuda"
    return sorted(p.relative_to(cuda).as_posix() for p in cuda.rglob("*") if p.suffix in (".cu", ".cuh"))


def test_the_engines_programs_use_every_source_in_cuda():
    units = translation_units()
    used = sorted({f for _, files in units.values() for f in files})
    assert used == checkout_sources() == cuda_sources.names()
    for name, (src, _) in units.items():
        assert cuda_sources.kernels(src), f"{name} defines no kernel"


def test_a_missing_source_is_a_clear_error():
    with pytest.raises(FileNotFoundError, match="no_such_kernel.cu"):
        cuda_sources.read("no_such_kernel.cu")


def _clean_checkout(dst: Path) -> Path:
    """The files a clean checkout has (tracked, or new and not ignored), copied to `dst`."""
    p = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, capture_output=True)
    if p.returncode:
        pytest.skip(f"not a git checkout ({p.stderr.decode(errors='replace').strip()[:200]})")
    for rel in filter(None, p.stdout.decode().split("\0")):
        src = REPO / rel
        if src.is_file():
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / rel)
    return dst


COMPILE = textwrap.dedent("""
    import importlib.util, json, sys
    import lsm_gnn
    from lsm_gnn.check.nvrtc import translation_units
    from lsm_gnn.utils import cuda_sources

    spec = importlib.util.spec_from_file_location("cuda_emu", sys.argv[1])
    emu = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(emu)
    cp = emu.fake_cupy()
    units = {}
    for name, (src, files) in translation_units().items():
        mod = cp.RawModule(code=src)
        kernels = cuda_sources.kernels(src)
        for k in kernels:
            mod.get_function(k)
        units[name] = {"files": files, "kernels": kernels}
    print(json.dumps({"lsm_gnn": lsm_gnn.__file__, "where": cuda_sources.where(),
                      "names": cuda_sources.names(), "units": units}))
""")


@pytest.mark.slow
@pytest.mark.skipif(not _has_cxx, reason="needs g++ for the CUDA stand-in")
def test_a_wheel_installed_outside_the_checkout_compiles_every_kernel(tmp_path):
    src = _clean_checkout(tmp_path / "checkout")
    dist = tmp_path / "dist"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input"]
    p = subprocess.run(pip + ["wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", str(dist), str(src)],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    (wheel,) = dist.glob("lsm_gnn-*.whl")
    expected = checkout_sources()
    with zipfile.ZipFile(wheel) as z:
        packaged = sorted(n[len("lsm_gnn/kernels/"):] for n in z.namelist() if n.startswith("lsm_gnn/kernels/"))
    assert packaged == expected

    # a fresh environment outside the checkout: the wheel, and torch/numpy/... of this one
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    py = venv / "bin" / "python"
    purelib = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    Path(purelib, "project_env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    p = subprocess.run(pip + ["--python", str(py), "install", "--no-deps", "--no-index", "--no-cache-dir", str(wheel)],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    p = subprocess.run([str(py), "-c", COMPILE, str(REPO / "tests" / "cuda_emu.py")], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    res = json.loads(p.stdout.strip().splitlines()[-1])
    assert Path(res["lsm_gnn"]).is_relative_to(venv), res["lsm_gnn"]
    assert "package data" in res["where"] and str(venv) in res["where"], res["where"]
    assert res["names"] == expected
    assert sorted({f for u in res["units"].values() for f in u["files"]}) == expected
    assert set(res["units"]) == {"cache module", "owner_split.cu", "reorder.cu"}
    assert all(u["kernels"] for u in res["units"].values())
