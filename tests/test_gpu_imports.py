"""The GPU path imports no dgl, snakemake or asv (the GPU machine's image has none of them).

Each check runs in a fresh interpreter whose import system refuses those packages (a meta-path
finder raising ImportError), imports the modules `lsm-gnn check gpu` drives, and fails if one of
them, or anything it imports, needs a refused package. pydantic stays allowed for the training
path (lsm_gnn.config validates every run's config with it); the cache engines, storage, the
dataset generator, the device row pool and the check itself must import without it too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

GPU_PATH = [
    "lsm_gnn.cache.gpu_engine", "lsm_gnn.cache.engine", "lsm_gnn.cache.budget", "lsm_gnn.sources.cached",
    "lsm_gnn.storage", "lsm_gnn.storage.open", "lsm_gnn.train.loop", "lsm_gnn.bench.train",
    "lsm_gnn.sources.factory", "lsm_gnn.sources.shared", "lsm_gnn.multidevice.exchange",
    "lsm_gnn.ranks.launch", "lsm_gnn.datasets.synthetic", "lsm_gnn.accelerator.measure", "lsm_gnn.bench.cache",
    "lsm_gnn.bench.multidevice", "lsm_gnn.check.cli", "lsm_gnn.check.gpu", "lsm_gnn.check.env",
]
# modules being written while this test was: checked once their file exists
OPTIONAL = ["lsm_gnn.cache.device_pool", "lsm_gnn.sources.cached_device"]
# what needs no pydantic (no run config): engines, storage, generator, row pool, the check itself
NO_CONFIG = [
    "lsm_gnn.cache.gpu_engine", "lsm_gnn.cache.engine", "lsm_gnn.cache.budget", "lsm_gnn.sources.cached",
    "lsm_gnn.storage", "lsm_gnn.sources.shared", "lsm_gnn.multidevice.exchange", "lsm_gnn.datasets.synthetic",
    "lsm_gnn.check.cli", "lsm_gnn.check.gpu", "lsm_gnn.check.env", "lsm_gnn.check.nvrtc", "lsm_gnn.check.compile",
    "lsm_gnn.bench.cache", "lsm_gnn.check.pytest_results",
]
BLOCKED = ["dgl", "snakemake", "asv"]

PRELUDE = textwrap.dedent("""
    import importlib, importlib.abc, importlib.util, json, sys, traceback
    BLOCKED = set(json.loads(sys.argv[1]))

    class Refuse(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ImportError(f"{name} is refused on the GPU path (test_gpu_imports)", name=name)
            return None

    sys.meta_path.insert(0, Refuse())
""")

IMPORTS = PRELUDE + textwrap.dedent("""
    failures = {}
    for name in json.loads(sys.argv[2]):
        try:
            importlib.import_module(name)
        except BaseException as e:
            failures[name] = traceback.format_exc()[-1500:]
    from lsm_gnn.storage import open_feature_store            # the names the check's steps use
    from lsm_gnn.datasets.synthetic import generate
    leaked = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
    print(json.dumps({"failures": failures, "leaked": leaked}))
""")


def _run(code: str, blocked: list[str], *args: str, timeout: float = 300) -> dict:
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               DGLBACKEND="pytorch")
    p = subprocess.run([sys.executable, "-c", code, json.dumps(blocked), *args], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def _modules(names: list[str]) -> list[str]:
    present = [m for m in OPTIONAL if (REPO / (m.replace(".", "/") + ".py")).is_file()]
    return names + present


def test_gpu_path_imports_without_dgl_snakemake_asv():
    res = _run(IMPORTS, BLOCKED, json.dumps(_modules(GPU_PATH)))
    assert res["failures"] == {}, "\n\n".join(f"{k}:\n{v}" for k, v in res["failures"].items())
    assert res["leaked"] == []


def test_engines_storage_generator_and_the_check_import_without_pydantic():
    res = _run(IMPORTS, BLOCKED + ["pydantic"], json.dumps(_modules(NO_CONFIG)))
    assert res["failures"] == {}, "\n\n".join(f"{k}:\n{v}" for k, v in res["failures"].items())
    assert res["leaked"] == []


RUN = PRELUDE + textwrap.dedent("""
    import contextlib, io
    from lsm_gnn.datasets.synthetic import generate
    from lsm_gnn.bench.train import bench_train

    root = sys.argv[2] + "/ds"
    generate(root, 3000, feature_dim=16, progress=False)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        bench_train.main([root, "--reader", "buffered", "--warmup", "1", "--timed", "2", "--threads", "1",
                          "--batch-size", "256", "--fanouts", "4,4", "--hidden", "16", "--json", "--quiet"],
                         standalone_mode=False)
    text = buf.getvalue()
    out = json.loads(text[text.index("{"):])
    leaked = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
    print(json.dumps({"ratio": out["steady_epoch_vs_memory"], "leaked": leaked}))
""")


def test_generate_and_bench_train_run_without_dgl_snakemake_asv(tmp_path):
    """What the check's dataset and train steps run (on the CPU here), with the packages refused:
    catches an import done lazily inside a function, which the import test cannot see."""
    res = _run(RUN, BLOCKED, str(tmp_path))
    assert res["leaked"] == []
    assert res["ratio"] > 0
