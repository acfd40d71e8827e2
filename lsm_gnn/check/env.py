"""What this machine has for the GPU path: versions, the GPU, and the one rule of "a GPU is here".

A GPU test (`@pytest.mark.gpu`, tests/conftest.py) runs when torch sees a CUDA device and CuPy is
usable; `@pytest.mark.gpu(devices=2)` needs that many. The same rule decides whether
`lsm-gnn check gpu` runs at all. Imports only the standard library at module level.
"""

from __future__ import annotations

import importlib.util
import os
import platform

NO_GPU = "needs a CUDA GPU (torch.cuda and CuPy)"
FEWER_DEVICES = "CUDA devices, this machine has"   # the skip of a test that needs more GPUs: "needs 2 <this> 1"


def gpu_presence() -> tuple[int, str]:
    """(usable CUDA devices, why none when 0): torch.cuda and CuPy must both see the device."""
    why = []
    torch_n = cupy_n = 0
    try:
        import torch

        torch_n = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if not torch_n:
            why.append(f"torch {torch.__version__} (CUDA {torch.version.cuda}): torch.cuda.is_available() is False")
    except Exception as e:  # noqa: BLE001 - any failure to import is "no GPU", with its reason
        why.append(f"torch does not import ({type(e).__name__}: {e})")
    try:
        import cupy

        cupy_n = cupy.cuda.runtime.getDeviceCount() if cupy.is_available() else 0
        if not cupy_n:
            why.append("cupy.is_available() is False")
    except Exception as e:  # noqa: BLE001
        why.append(f"cupy does not work ({type(e).__name__}: {e})")
    return min(torch_n, cupy_n), "; ".join(why)


def gpu_skip_reason(need: int = 1, presence: tuple[int, str] | None = None) -> str | None:
    """Why a GPU test needing `need` devices cannot run here (None: it can)."""
    found, why = presence if presence is not None else gpu_presence()
    if found == 0:
        return f"{NO_GPU}: {why}" if why else NO_GPU
    if found < need:
        return f"needs {need} {FEWER_DEVICES} {found}"
    return None


def missing_modules(names) -> list[str]:
    out = []
    for name in names:
        try:
            if importlib.util.find_spec(name) is None:
                out.append(name)
        except (ImportError, ValueError):
            out.append(name)
    return out


def versions() -> dict:
    """Python, the platform, numpy/numba/torch/CUDA/CuPy and the GPU (what there is of them)."""
    v: dict = {"python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count()}
    for name in ("numpy", "numba", "llvmlite", "pytest"):
        try:
            v[name] = __import__(name).__version__
        except Exception as e:  # noqa: BLE001
            v[name] = f"missing ({type(e).__name__}: {e})"
    try:
        import torch

        v["torch"], v["torch_cuda"] = torch.__version__, torch.version.cuda
        if torch.cuda.is_available():
            p = torch.cuda.get_device_properties(0)
            v.update(gpu_name=p.name, gpu_count=torch.cuda.device_count(),
                     gpu_memory_gib=round(p.total_memory / 2**30, 1), gpu_compute_capability=f"{p.major}.{p.minor}")
    except Exception as e:  # noqa: BLE001
        v["torch"] = f"missing ({type(e).__name__}: {e})"
    try:
        import cupy

        v["cupy"] = cupy.__version__
        if cupy.is_available():
            rt = cupy.cuda.runtime
            v.update(cupy_cuda_runtime=rt.runtimeGetVersion(), cuda_driver=rt.driverGetVersion())
    except Exception as e:  # noqa: BLE001
        v["cupy"] = f"missing ({type(e).__name__}: {e})"
    v["dgl"] = "installed (the GPU path must not import it)" if not missing_modules(["dgl"]) else None
    return v


def import_each(modules) -> dict:
    """{module: "ok" or the end of its traceback}: each imported in this process."""
    import importlib
    import traceback

    out = {}
    for name in modules:
        try:
            importlib.import_module(name)
            out[name] = "ok"
        except BaseException:  # noqa: BLE001 - whatever stops the import is the answer
            out[name] = traceback.format_exc()[-1500:]
    return out


def report(modules=()) -> dict:
    """The check's env step: versions, usable GPUs (and why none), where the kernel sources are,
    and whether each of `modules` (the steps' modules) imports here, a GPU or not."""
    from lsm_gnn.utils import cuda_sources

    devices, why = gpu_presence()
    return {"versions": versions(), "devices": devices, "why": why, "kernel_sources": cuda_sources.where(),
            "imports": import_each(modules)}
