"""The CUDA sources of the GPU engines: where they are and what each engine compiles.

The sources live in the repository's top-level `cuda/` folder and ship inside the package as
`lsm_gnn.kernels` (setup.py maps `cuda/` onto it; pyproject.toml's package data names the files).
Every engine reads them through `read()`, so an installed wheel and a source checkout load the
same way: a checkout (its `cuda/` beside the imported `lsm_gnn`, as an editable install or
`PYTHONPATH` has it) reads its own folder, anything else the package's data through
`importlib.resources`.

Every program the engines compile, with the files each is made of, is
lsm_gnn.check.nvrtc.translation_units() (it asks the engines, which stand above this module).
"""

from __future__ import annotations

import importlib.resources
import re
from pathlib import Path

PACKAGE = "lsm_gnn.kernels"
SUFFIXES = (".cu", ".cuh")
COMPILE_OPTIONS = ("-std=c++11",)
"""The options every engine compiles its programs with (cupy.RawModule's `options`, i.e. NVRTC's),
and the compile check (lsm_gnn.check.compile) with them, adding only the target architecture and
ptxas' resource report. One definition, so the check compiles what runs."""
KERNEL_RE = re.compile(r'extern\s+"C"\s+__global__\s+void\s+(\w+)\s*\(')
_CHECKOUT = Path(__file__).resolve().parents[2]


def root():
    """The folder of the sources (a `Path` in a checkout, an importlib.resources Traversable in an
    installed package)."""
    if (_CHECKOUT / "pyproject.toml").is_file() and (_CHECKOUT / "cuda").is_dir():
        return _CHECKOUT / "cuda"
    return importlib.resources.files(PACKAGE)


def where() -> str:
    """Where the sources are read from, for reports."""
    r = root()
    return f"{r} ({'source checkout' if isinstance(r, Path) else 'package data ' + PACKAGE})"


def read(name: str) -> str:
    """The text of one source by its name relative to the folder, e.g. "policies/lru.cuh"."""
    node = root()
    for part in name.split("/"):
        node = node.joinpath(part)
    if not node.is_file():
        raise FileNotFoundError(f"CUDA source {name!r} is not in {where()}")
    return node.read_text()


def names(folder: str = "") -> list[str]:
    """Every source (.cu, .cuh) under `folder` (all of them by default), relative names, sorted."""
    out = []

    def walk(node, prefix):
        for child in node.iterdir():
            rel = prefix + child.name
            if child.is_dir() and child.name != "__pycache__":
                walk(child, rel + "/")
            elif child.is_file() and child.name.endswith(SUFFIXES):
                out.append(rel)

    node = root()
    for part in filter(None, folder.split("/")):
        node = node.joinpath(part)
    walk(node, folder.rstrip("/") + "/" if folder else "")
    return sorted(out)


def kernels(text: str) -> list[str]:
    """Names of the `extern "C" __global__` kernels defined in `text`."""
    return KERNEL_RE.findall(text)
