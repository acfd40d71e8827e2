#!/usr/bin/env python3
"""Every GPU check of the project in one run, for a session that has a GPU machine (< 6 minutes).

Usage, from the repository root, on a machine with a CUDA GPU (bare image: Python 3.12, torch
with CUDA, cupy-cuda13x, numba, numpy; no dgl, no internet):

    PYTHONPATH=. python3 cuda/gpu_check.py --out DIR [--quick] [--wheelhouse WHEELS]

What runs, in order, each step in its own process with a time limit (a step that fails or runs
out of time records {"error": ...} and the later steps still run):

1. env: versions (python, torch, CUDA, cupy, numba, numpy), the GPU, which modules are missing;
   without a GPU the check stops here (exit 2, the JSON says "no GPU").
2. tests: every GPU test file (tests/*.py scanned for GPU markers, checked against
   EXPECTED_GPU_TESTS so a rename is caught), one pytest run per file selecting only its GPU
   tests, with a JUnit XML per file. A file fails if any selected test fails or is SKIPPED, if it
   collects no GPU test (pytest exit 5 is a failure here), or if it cannot be imported.
3. engine: GpuCacheEngine vs CpuCacheEngine replaying the same skewed trace (requests/s, ratio;
   their per-batch counts must be equal).
4. gather: hit-path gather (lsm_gnn.cache.device_pool.gather_rows, random index) vs the device's
   own contiguous device-to-device copy of the same bytes, CUDA events.
5. dataset: a synthetic graph (lsm_gnn.datasets.synthetic.generate, what `lsm-gnn dataset
   generate` calls) under --data-dir (removed at the end unless --keep-data).
6. train: `lsm-gnn bench train` (lsm_gnn/train/bench.py) with train.device=cuda: LSM-GNN at a
   10 % memory budget vs the in-memory ideal.
7. multidevice: a 2-rank shared-cache training run on the one GPU. NCCL refuses two ranks on one
   GPU ("Duplicate GPU detected"), so the ranks use gloo: both train on cuda:0 and exchange rows
   through host memory.

DIR/gpu_check.json (written atomically after every step, so a killed run still leaves one):
ok, complete, exit_status, tests, benchmarks, targets, elapsed_s, versions, unverified.
DIR/tests/<file>.log and .junit.xml, DIR/steps/<step>.log and .json.

Exit status: 0 everything ran, every test passed, every target met; 1 a test or a step failed
(or ran out of time); 2 no GPU; 3 everything ran and passed but a performance target was missed.

This file imports only the standard library at module level (the steps import the rest), so it
loads, and says what is missing, on any Python 3.11+.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib.util
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS_DIR = ROOT / "tests"

# ---- which tests are GPU tests ----------------------------------------------------------------
# Every file here must be found by the scan (else: renamed or its markers removed -> failure),
# and is run with the pytest selection of its GPU tests.
EXPECTED_GPU_TESTS: dict[str, list[str]] = {
    # the "cupy" backend params carry pytest.mark.gpu (+ requires_gpu); "emulated" ones are CPU tests
    "tests/test_cache_gpu.py": ["-m", "gpu"],
    # the torch device data plane (DeviceCachedFeatureSource / DeviceRowPool) on cuda
    "tests/test_cache_device_source.py": ["-m", "gpu"],
    # @requires_gpu without the gpu marker: select by name
    "tests/test_multidevice_owners.py": ["-k", "test_gpu_"],
    # skipif(not gpu.cuda_available()); the no-GPU behaviour check is skipped on a GPU: deselect it
    "tests/test_storage_gpu.py": ["-k", "not no_gpu"],
}
DEFAULT_SELECTION = ["-m", "gpu"]  # a GPU test file found by the scan but not listed above
SCAN_EXCLUDE = {"test_gpu_check.py", "test_gpu_imports.py"}  # they talk about markers, hold no GPU test
GPU_MARKERS = {
    "requires_gpu": re.compile(r"\brequires_gpu\b"),
    "mark.gpu": re.compile(r"\bmark\.gpu\b"),
    "gpu backend param": re.compile(r"""\bparam\(\s*["'](?:cupy|gpu|cuda)["']"""),
    "gpu backend parametrize": re.compile(r"""\bparametrize\([^)]*?["'](?:cupy|gpu|cuda)["']"""),
    "gpu fixture params": re.compile(r"""\bparams\s*=\s*[\[(][^\])]*?["'](?:cupy|gpu|cuda)["']"""),
    "skipif(not cuda)": re.compile(r"skipif\(\s*not\s+[\w.]*(?:cuda_available|is_available|gpu_available)\(\)"),
}

# ---- what the steps need ----------------------------------------------------------------------
# module -> distribution to install (from a wheelhouse: the GPU image has no internet)
MODULE_DISTS = {"pytest": "pytest", "cupy": "cupy-cuda13x", "torch": "torch", "numba": "numba",
                "numpy": "numpy", "pydantic": "pydantic", "yaml": "pyyaml", "tqdm": "tqdm",
                "jsonschema": "jsonschema", "psutil": "psutil", "click": "click"}
STEP_MODULES = {
    "tests": ["pytest", "numpy", "numba", "torch", "cupy"],
    "engine": ["numpy", "numba", "cupy"],
    "gather": ["torch"],
    "dataset": ["numpy", "numba", "tqdm"],
    # lsm_gnn.config needs pydantic + yaml; run records jsonschema + psutil; the loop tqdm;
    # bench train click (without click the step calls run_training directly)
    "train": ["torch", "numba", "pydantic", "yaml", "tqdm", "jsonschema", "psutil"],
    "multidevice": ["torch", "numba", "pydantic", "yaml", "tqdm", "jsonschema", "psutil"],
}
WHEELS_HINT = ("bring wheels for Python 3.12: on a machine with internet `pip download --only-binary=:all: "
               "--python-version 3.12 --platform manylinux2014_x86_64 -d wheels {dists}`, carry wheels/, "
               "and run this check with --wheelhouse wheels")

# ---- sizes and time limits (seconds) ----------------------------------------------------------
SIZES = {
    "full": dict(engine_rows=4_000_000, engine_batches=40, engine_batch=200_000,
                 gather_rows=200_000, gather_table=800_000,
                 nodes=200_000, warmup=20, timed=40, md_warmup=10, md_timed=20),
    "quick": dict(engine_rows=400_000, engine_batches=12, engine_batch=20_000,
                  gather_rows=50_000, gather_table=200_000,
                  nodes=50_000, warmup=8, timed=16, md_warmup=4, md_timed=6),
}
BUDGET_S = {"full": 345, "quick": 200}          # the whole check
TESTS_SHARE = 0.45                                # at most this share of the budget for the tests
TEST_FILE_LIMIT_S = {"full": 150, "quick": 90}
STEP_LIMIT_S = {"full": dict(env=60, engine=75, gather=45, dataset=60, train=120, multidevice=100),
                "quick": dict(env=60, engine=45, gather=30, dataset=40, train=75, multidevice=60)}
MIN_STEP_S = 10                                   # do not start a step with less time than this
BENCH_STEPS = ("engine", "gather", "dataset", "train", "multidevice")

# headline numbers: (step, field, op, target)
TARGETS = {
    "gpu_vs_cpu_requests_ratio": ("engine", ">=", 50.0),
    "gpu_gather_vs_copy_bw": ("gather", ">=", 0.5),
    "steady_epoch_vs_memory": ("train", "<=", 1.15),
}
ROW_BYTES = 4096      # 1024 float32 features: IGB's rows
DEVICE = "cuda"       # train.device of the train steps (a CPU smoke test of the plumbing sets "cpu")
FEATURE_DIM = 1024
CACHE_FRACTION = 0.10


# =================================================================================================
# helpers
def write_json_atomic(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(obj, f, indent=2, default=_json_default)
            f.write("\n")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _json_default(o):
    for cast in (float, int, str):
        try:
            return cast(o)
        except Exception:  # noqa: BLE001
            continue
    return repr(o)


def missing_modules(names) -> list[str]:
    out = []
    for name in names:
        try:
            if importlib.util.find_spec(name) is None:
                out.append(name)
        except (ImportError, ValueError):
            out.append(name)
    return out


def _subprocess_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    env.setdefault("DGLBACKEND", "pytorch")
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def run_limited(cmd: list[str], timeout: float, log_path: Path, env: dict | None = None) -> tuple[int, bool, float]:
    """Run `cmd` in its own process group with stdout+stderr to `log_path`; kill the whole group
    (spawned ranks included) after `timeout` s. Returns (exit code, timed out, seconds)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with open(log_path, "w") as log:
        p = subprocess.Popen(cmd, cwd=ROOT, env=env or _subprocess_env(), stdout=log, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            rc = p.wait(timeout=max(1.0, timeout))
            timed_out = False
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            rc = p.wait()
            timed_out = True
            log.write(f"\n[gpu_check] killed after {timeout:.0f} s (time limit)\n")
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(p.pid, signal.SIGKILL)  # leftovers of a step that exited (e.g. orphaned ranks)
    return rc, timed_out, time.perf_counter() - t0


def _tail(path: Path, n: int = 15) -> str:
    try:
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return "\n".join(lines[-n:])


# =================================================================================================
# GPU tests: scan, run, judge
def scan_gpu_test_files(tests_dir: Path = TESTS_DIR) -> dict[str, list[str]]:
    """{path: markers found} for every tests_dir/test_*.py holding a GPU marker; paths relative
    to the repository root when inside it."""
    found = {}
    for f in sorted(Path(tests_dir).glob("test_*.py")):
        if f.name in SCAN_EXCLUDE:
            continue
        try:
            text = f.read_text(errors="replace")
        except OSError:
            continue
        hits = [name for name, rx in GPU_MARKERS.items() if rx.search(text)]
        if hits:
            found[_rel(f)] = hits
    return found


def _rel(path: Path) -> str:
    path = Path(path).resolve()
    try:
        return path.relative_to(ROOT).as_posix()
    except ValueError:
        return str(path)


def check_expected(found: dict, expected=EXPECTED_GPU_TESTS) -> dict[str, str]:
    """{expected file: problem} for each expected GPU test file the scan did not find."""
    problems = {}
    for rel in expected:
        if rel in found:
            continue
        if not (ROOT / rel).is_file():
            problems[rel] = "expected GPU test file does not exist (renamed or removed? update EXPECTED_GPU_TESTS)"
        else:
            problems[rel] = "expected GPU test file has no GPU marker any more (scan found none)"
    return problems


def junit_counts(path: Path) -> dict | None:
    """Counts of a pytest JUnit XML: tests, passed, failed, errors, skipped (+ names, reasons)."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return None
    out = {"tests": 0, "passed": 0, "failed": 0, "errors": 0, "skipped": 0,
           "failed_tests": [], "error_tests": [], "skip_reasons": []}
    for case in root.iter("testcase"):
        out["tests"] += 1
        name = f"{case.get('classname', '')}::{case.get('name', '')}".strip(":")
        kinds = {child.tag: child for child in case}
        if "error" in kinds:
            out["errors"] += 1
            out["error_tests"].append(f"{name}: {kinds['error'].get('message', '')}"[:300])
        elif "failure" in kinds:
            out["failed"] += 1
            out["failed_tests"].append(f"{name}: {kinds['failure'].get('message', '')}"[:300])
        elif "skipped" in kinds:
            out["skipped"] += 1
            out["skip_reasons"].append(f"{name}: {kinds['skipped'].get('message', '')}"[:300])
        else:
            out["passed"] += 1
    return out


def judge_test_run(rc: int, counts: dict | None, timed_out: bool = False, timeout: float | None = None,
                   log_tail: str = "") -> list[str]:
    """Problems of one GPU test file's pytest run (empty: it passed). Strict: a skipped GPU
    test, no GPU test collected (exit 5), an import error, a failure, a timeout all count."""
    problems = []
    if timed_out:
        problems.append(f"timed out after {timeout:.0f} s" if timeout else "timed out")
    if counts is None:
        if "No module named pytest" in log_tail:
            problems.append("pytest is not installed in this Python")
        elif not timed_out:
            problems.append(f"pytest wrote no JUnit XML (exit {rc}); see the log")
        return problems
    if rc == 5 or counts["tests"] == 0:
        problems.append("collected no GPU test (pytest exit 5): the selection matched nothing")
    if rc in (2, 3, 4):
        what = {2: "interrupted (collection or import error)", 3: "internal error", 4: "usage error"}[rc]
        problems.append(f"pytest exit {rc}: {what}")
    if counts["errors"]:
        problems.append(f"{counts['errors']} error(s): " + "; ".join(counts["error_tests"][:3]))
    if counts["failed"]:
        problems.append(f"{counts['failed']} failed: " + "; ".join(counts["failed_tests"][:5]))
    if counts["skipped"]:
        problems.append(f"{counts['skipped']} GPU test(s) skipped: " + "; ".join(counts["skip_reasons"][:3]))
    if rc not in (0, 2, 3, 4, 5) and not (counts["failed"] or counts["errors"] or timed_out):
        problems.append(f"pytest exit {rc}")
    return problems


def run_test_file(path, selection: list[str], out_dir: Path, timeout: float, env: dict | None = None) -> dict:
    """One pytest run over `path` with `selection` (e.g. ["-m", "gpu"]): JUnit XML and log in
    out_dir; returns rc, counts, problems and ok."""
    path = Path(path)
    path = path if path.is_absolute() else ROOT / path
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    junit, log = out_dir / f"{path.stem}.junit.xml", out_dir / f"{path.stem}.log"
    if junit.exists():
        junit.unlink()
    cmd = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", *selection,
           f"--junitxml={junit}", str(path)]
    rc, timed_out, secs = run_limited(cmd, timeout, log, env)
    counts = junit_counts(junit)
    tail = _tail(log, 40)
    problems = judge_test_run(rc, counts, timed_out, timeout, tail)
    lines = tail.splitlines()
    return {"file": _rel(path), "selection": selection, "rc": rc, "timed_out": timed_out,
            "seconds": round(secs, 1), "counts": counts, "ok": not problems, "problems": problems,
            "summary": lines[-1] if lines else "", "log": str(log), "junit": str(junit)}


def run_tests(out_dir: Path, deadline: float, per_file_limit: float) -> dict:
    """Every GPU test file: scan, check against EXPECTED_GPU_TESTS, run each with a time limit."""
    found = scan_gpu_test_files()
    missing = check_expected(found)
    results: dict = {}
    for rel, problem in missing.items():
        results[rel] = {"file": rel, "ok": False, "problems": [problem], "counts": None}
        print(f"[tests] {rel}: FAIL {problem}", flush=True)
    for rel, markers in found.items():
        selection = EXPECTED_GPU_TESTS.get(rel, DEFAULT_SELECTION)
        left = deadline - time.monotonic()
        if left < MIN_STEP_S:
            results[rel] = {"file": rel, "ok": False, "counts": None,
                            "problems": ["not run: the time budget of the tests was spent"]}
            print(f"[tests] {rel}: NOT RUN (time budget spent)", flush=True)
            continue
        r = run_test_file(rel, selection, out_dir, min(per_file_limit, left))
        r["markers"] = markers
        if rel not in EXPECTED_GPU_TESTS:
            r["note"] = "found by the scan but not in EXPECTED_GPU_TESTS: ran with the default selection"
        results[rel] = r
        c = r["counts"] or {}
        status = "PASS" if r["ok"] else "FAIL"
        print(f"[tests] {rel}: {status} {c.get('passed', 0)} passed, {c.get('failed', 0)} failed, "
              f"{c.get('skipped', 0)} skipped, {c.get('errors', 0)} errors ({r['seconds']} s)"
              + ("" if r["ok"] else " -- " + "; ".join(r["problems"])), flush=True)
    return results


# =================================================================================================
# steps (each runs in its own process: `gpu_check.py --step NAME --step-out FILE`)
def _sizes(a) -> dict:
    return SIZES["quick" if a.quick else "full"]


def _dataset_root(a) -> Path:
    return Path(a.data_dir) / f"synthetic-{_sizes(a)['nodes']}"


def step_env(a) -> dict:
    """Versions and the GPU. gpu: True when torch or CuPy sees a CUDA device."""
    import platform

    v: dict = {"python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count()}
    out: dict = {"versions": v, "gpu": False, "why_no_gpu": []}
    for name in ("numpy", "numba", "llvmlite"):
        try:
            v[name] = __import__(name).__version__
        except Exception as e:  # noqa: BLE001
            v[name] = f"missing ({type(e).__name__}: {e})"
    try:
        import torch

        v["torch"] = torch.__version__
        v["torch_cuda"] = torch.version.cuda
        if torch.cuda.is_available():
            out["gpu"] = True
            p = torch.cuda.get_device_properties(0)
            v["gpu_name"] = p.name
            v["gpu_count"] = torch.cuda.device_count()
            v["gpu_memory_gib"] = round(p.total_memory / 2**30, 1)
            v["gpu_compute_capability"] = f"{p.major}.{p.minor}"
        else:
            out["why_no_gpu"].append(f"torch {torch.__version__} (CUDA {torch.version.cuda}): "
                                     "torch.cuda.is_available() is False")
    except Exception as e:  # noqa: BLE001
        v["torch"] = f"missing ({type(e).__name__}: {e})"
        out["why_no_gpu"].append(f"torch does not import ({type(e).__name__}: {e})")
    try:
        import cupy

        v["cupy"] = cupy.__version__
        if cupy.is_available():
            out["gpu"] = True
            rt = cupy.cuda.runtime
            v["cupy_cuda_runtime"] = rt.runtimeGetVersion()
            v["cuda_driver"] = rt.driverGetVersion()
            v.setdefault("gpu_name", rt.getDeviceProperties(0)["name"].decode())
        else:
            out["why_no_gpu"].append("cupy.is_available() is False")
    except Exception as e:  # noqa: BLE001
        v["cupy"] = f"missing ({type(e).__name__}: {e})"
        out["why_no_gpu"].append(f"cupy does not import ({type(e).__name__}: {e})")
    v["dgl"] = "installed (the GPU path must not import it)" if not missing_modules(["dgl"]) else None
    return out


def skewed_trace(num_rows: int, batches: int, batch: int, seed: int = 0):
    """Power-law popularity over a random permutation of the ids (a few hot rows, a long tail)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    perm = rng.permutation(num_rows)
    idx = (num_rows * rng.random(batches * batch) ** 3).astype(np.int64)
    flat = perm[np.minimum(idx, num_rows - 1)]
    offsets = np.arange(0, batches * batch + 1, batch, dtype=np.int64)
    return flat, offsets


# the paper's policy with and without its victim buffer, two baselines, and horizon (its long
# lookahead ring: K = 128 batches, no host tier)
ENGINE_CASES = (("hybrid", True), ("hybrid", False), ("lru", False), ("sieve", False), ("horizon", False))


def step_engine(a) -> dict:
    """GpuCacheEngine vs CpuCacheEngine on the same trace; headline: hybrid + PVP (LSM-GNN's)."""
    import cupy as cp
    import numpy as np

    from lsm_gnn.cache.engine import COUNT_NAMES, CpuCacheEngine
    from lsm_gnn.cache.gpu_engine import GpuCacheEngine

    s = _sizes(a)
    num_rows, batches, batch = s["engine_rows"], s["engine_batches"], s["engine_batch"]
    capacity = num_rows // 10
    flat, offsets = skewed_trace(num_rows, batches, batch)
    static = np.random.default_rng(1).integers(0, 256, num_rows).astype(np.uint8)
    warm = min(5000, num_rows)
    small_flat, small_off = skewed_trace(warm, 3, warm // 10)
    flat_dev = cp.asarray(flat)
    cases = []
    for policy, pvp in ENGINE_CASES:
        kw = dict(ways=32, policy=policy, window=8, pvp=pvp, victim_depth=32768)
        # warm-up: numba compilation, NVRTC compilation, CuPy's scan/sort kernels
        CpuCacheEngine(warm // 10, warm, static[:warm], **kw).replay(small_flat, small_off)
        GpuCacheEngine(warm // 10, warm, static[:warm], **kw).replay(small_flat, small_off)
        cpu = CpuCacheEngine(capacity, num_rows, static, **kw)
        t0 = time.perf_counter()
        out_c = cpu.replay(flat, offsets)
        t_cpu = time.perf_counter() - t0
        gpu = GpuCacheEngine(capacity, num_rows, static, **kw)
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        out_g = gpu.replay(flat_dev, offsets)
        cp.cuda.Device().synchronize()
        t_gpu = time.perf_counter() - t0
        same = bool(np.array_equal(out_c, out_g))
        tot = dict(zip(COUNT_NAMES, out_c.sum(axis=0).tolist()))
        n = int(len(flat))
        c = {"policy": gpu.policy_name, "pvp": pvp, "cpu_requests_per_s": n / t_cpu,
             "gpu_requests_per_s": n / t_gpu, "gpu_vs_cpu_requests_ratio": t_cpu / t_gpu,
             "gpu_ms_per_batch": 1e3 * t_gpu / batches, "cpu_ms_per_batch": 1e3 * t_cpu / batches,
             "hit_rate": tot["hits"] / max(tot["distinct"], 1), "counts_equal": same}
        if not same:
            bad = np.flatnonzero((out_c != out_g).any(axis=1))
            c["first_differing_batch"] = int(bad[0])
            c["cpu_counts"] = dict(zip(COUNT_NAMES, out_c[bad[0]].tolist()))
            c["gpu_counts"] = dict(zip(COUNT_NAMES, out_g[bad[0]].tolist()))
        cases.append(c)
        print(f"[engine] {c['policy']:<10} cpu {c['cpu_requests_per_s'] / 1e6:8.2f} M req/s  gpu "
              f"{c['gpu_requests_per_s'] / 1e6:8.2f} M req/s  ratio {c['gpu_vs_cpu_requests_ratio']:6.1f}x  "
              f"hit rate {c['hit_rate']:.3f}  counts {'equal' if same else 'DIFFER'}", flush=True)
    head = cases[0]
    out = {"gpu_requests_per_s": head["gpu_requests_per_s"],
           "gpu_vs_cpu_requests_ratio": head["gpu_vs_cpu_requests_ratio"],
           "cpu_requests_per_s": head["cpu_requests_per_s"], "headline_case": head["policy"],
           "min_gpu_vs_cpu_requests_ratio": min(c["gpu_vs_cpu_requests_ratio"] for c in cases),
           "counts_equal": all(c["counts_equal"] for c in cases),
           "trace": {"rows": num_rows, "batches": batches, "batch": batch, "requests": int(len(flat)),
                     "capacity_lines": capacity, "ways": 32, "window": 8, "victim_depth": 32768},
           "cases": cases}
    if not out["counts_equal"]:
        out["error"] = "GPU and CPU engines' per-batch counts differ: " + ", ".join(
            c["policy"] for c in cases if not c["counts_equal"])
    return out


def _cuda_ms(fn, reps: int, warmup: int = 3) -> float:
    """Median milliseconds of fn() over `reps` runs timed with CUDA events, after a warm-up."""
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


def step_gather(a) -> dict:
    """Hit path: gather_rows(src, random index, out) vs one contiguous out.copy_(src[:n]) of the
    same bytes, on the same device, in this run."""
    import torch

    s = _sizes(a)
    n, table = s["gather_rows"], s["gather_table"]
    dev = torch.device("cuda")
    out: dict = {"rows": n, "row_bytes": ROW_BYTES, "table_rows": table, "bytes": n * ROW_BYTES,
                 "index": "random rows of the table (a permutation's prefix: no repeats)", "timing":
                 "CUDA events, median of the timed runs after 3 warm-up runs",
                 "bandwidth_convention": "payload bytes (rows x row bytes) per second; both sides read and "
                                         "write the same payload"}
    try:
        from lsm_gnn.cache.device_pool import gather_rows, word_dtype
    except Exception as e:  # noqa: BLE001
        gather_rows, word_dtype = None, None
        out["import_error"] = f"lsm_gnn.cache.device_pool: {type(e).__name__}: {e}"
    word = word_dtype(ROW_BYTES) if word_dtype else torch.int64   # the row pool's view of a row
    words = ROW_BYTES // torch.empty(0, dtype=word).element_size()
    out["word_dtype"] = str(word)
    src = torch.randint(-2**31, 2**31 - 1, (table, words), dtype=torch.int64, device=dev).to(word)
    index = torch.randperm(table, device=dev)[:n].contiguous()
    dst = torch.empty((n, words), dtype=word, device=dev)
    copy_dst = torch.empty_like(dst)
    reps = 5 if a.quick else 10
    copy_ms = _cuda_ms(lambda: copy_dst.copy_(src[:n]), reps)
    select_ms = _cuda_ms(lambda: torch.index_select(src, 0, index, out=dst), reps)
    gb = n * ROW_BYTES / 1e9
    out.update(copy_ms=copy_ms, copy_gb_per_s=gb / (copy_ms / 1e3),
               torch_index_select_ms=select_ms, torch_index_select_gb_per_s=gb / (select_ms / 1e3),
               torch_index_select_vs_copy_bw=copy_ms / select_ms)
    if gather_rows is None:
        out["error"] = f"gather_rows not measured: {out['import_error']}"
        return out
    dst.zero_()
    gather_rows(src, index, dst)
    torch.cuda.synchronize()
    out["gather_correct"] = bool(torch.equal(dst, src.index_select(0, index)))
    gather_ms = _cuda_ms(lambda: gather_rows(src, index, dst), reps)
    out.update(gather_ms=gather_ms, gather_gb_per_s=gb / (gather_ms / 1e3),
               gpu_gather_vs_copy_bw=copy_ms / gather_ms)
    print(f"[gather] copy {out['copy_gb_per_s']:.0f} GB/s, gather_rows {out['gather_gb_per_s']:.0f} GB/s "
          f"-> ratio {out['gpu_gather_vs_copy_bw']:.2f}", flush=True)
    if not out["gather_correct"]:
        out["error"] = "gather_rows returned rows different from src[index]"
    return out


def step_dataset(a) -> dict:
    """The synthetic graph the train steps use (IGB-like, 1024-dim float32 features)."""
    from lsm_gnn.datasets.synthetic import generate
    from lsm_gnn.utils.machine import o_direct_works

    n = _sizes(a)["nodes"]
    root = _dataset_root(a)
    root.parent.mkdir(parents=True, exist_ok=True)
    need = 2.2 * n * ROW_BYTES  # features + the 2 owners' files of the multidevice step
    free = shutil.disk_usage(root.parent).free
    if free < need:
        return {"error": f"{root.parent}: {free / 2**30:.1f} GiB free, need {need / 2**30:.1f} GiB (--data-dir)"}
    t0 = time.perf_counter()
    ds = generate(root, n, seed=0, feature_dim=FEATURE_DIM, progress=False, overwrite=True)
    lay = ds.features()
    return {"path": str(root), "nodes": ds.num_nodes(), "edges": ds.num_edges(),
            "feature_bytes": lay.num_rows * lay.row_bytes, "seconds": time.perf_counter() - t0,
            "o_direct": o_direct_works(Path(lay.path)),
            "via": "lsm_gnn.datasets.synthetic.generate (what `lsm-gnn dataset generate` calls)"}


def _dataset_for_training(a) -> tuple[Path, str, list[str]]:
    from lsm_gnn.datasets.format import Dataset
    from lsm_gnn.utils.machine import o_direct_works

    root = _dataset_root(a)
    if not root.is_dir():
        raise RuntimeError(f"no dataset at {root}: the dataset step did not produce it")
    notes = []
    reader = "direct"
    if not o_direct_works(Path(Dataset(root).features().path)):
        reader = "buffered"
        notes.append(f"{root}: the filesystem refuses O_DIRECT; the cached runs read through the page cache")
    return root, reader, notes


def _json_from(text: str) -> dict:
    start = text.find("{")
    while start >= 0:
        try:
            return json.JSONDecoder().raw_decode(text[start:])[0]
        except json.JSONDecodeError:
            start = text.find("{", start + 1)
    raise ValueError("no JSON object in the output of bench train")


def step_train(a) -> dict:
    """`lsm-gnn bench train` with train.device=cuda: LSM-GNN (10 % memory) vs the in-memory ideal."""
    import torch

    s = _sizes(a)
    root, reader, notes = _dataset_for_training(a)
    threads = max(1, min(16, (os.cpu_count() or 2) - 1))
    out: dict = {"dataset": str(root), "reader": reader, "cache_fraction": CACHE_FRACTION, "threads": threads,
                 "warmup_iters": s["warmup"], "timed_iters": s["timed"], "device": DEVICE,
                 "gpu": torch.cuda.get_device_name(0) if DEVICE == "cuda" else None, "notes": notes}
    try:
        from lsm_gnn.train.bench import bench_train
    except ModuleNotFoundError as e:
        if e.name != "click":
            raise
        notes.append("click is missing: ran the two systems through lsm_gnn.train.loop.run_training "
                     "directly, with bench train's settings")
        return {**out, **_train_direct(root, reader, threads, s), "via": "run_training (click missing)"}
    argv = [str(root), "--cache-fraction", str(CACHE_FRACTION), "--reader", reader,
            "--warmup", str(s["warmup"]), "--timed", str(s["timed"]), "--threads", str(threads),
            "--set", f"train.device={DEVICE}", "--json", "--quiet"]
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        bench_train.main(argv, standalone_mode=False)
    res = _json_from(buf.getvalue())
    out.update(via="lsm_gnn.train.bench (bench train --json)", argv=argv,
               steady_epoch_vs_memory=res["steady_epoch_vs_memory"],
               hidden_fetch_fraction=res["hidden_fetch_fraction"],
               memory_epoch_steady_s=res["memory_epoch_steady_s"], lsm_epoch_steady_s=res["lsm_epoch_steady_s"],
               lsm_hit_rate=res.get("lsm_hit_rate"), lsm_memory=res.get("lsm_memory"),
               lsm_storage_bytes_per_iter=res.get("lsm_storage_bytes_per_iter"), bench=res)
    print(f"[train] steady_epoch_vs_memory {out['steady_epoch_vs_memory']:.3f}, "
          f"hidden_fetch_fraction {out['hidden_fetch_fraction']}", flush=True)
    return out


def _train_direct(root: Path, reader: str, threads: int, s: dict) -> dict:
    from lsm_gnn.config import load_config
    from lsm_gnn.train.loop import run_training

    common = {"dataset.path": str(root), "train.epochs": 1, "train.warmup_iters": s["warmup"],
              "train.timed_iters": s["timed"], "train.eval": False, "train.device": DEVICE,
              "train.threads": threads}
    systems = {"memory": {"storage.reader": "memory", "cache.enabled": False},
               "lsm": {"storage.reader": reader, "cache.enabled": True, "cache.capacity_fraction": CACHE_FRACTION}}
    res = {}
    for name, over in systems.items():
        rec = run_training(load_config(None, {**common, **over}), progress=False, record_path=None)
        t = rec["metrics"]["time"]
        res[name] = {"epoch_steady_s": t["epoch_steady_s"], "hidden_fetch_fraction": t["hidden_fetch_fraction"],
                     "hit_rate": rec["metrics"]["hit_rate"], "source": rec["metrics"]["source"]["kind"]}
    return {"steady_epoch_vs_memory": res["lsm"]["epoch_steady_s"] / res["memory"]["epoch_steady_s"],
            "hidden_fetch_fraction": res["lsm"]["hidden_fetch_fraction"],
            "memory_epoch_steady_s": res["memory"]["epoch_steady_s"],
            "lsm_epoch_steady_s": res["lsm"]["epoch_steady_s"], "systems": res}


def step_multidevice(a) -> dict:
    """2 ranks, shared cache, one GPU: gloo (NCCL refuses two ranks on one GPU), both on cuda:0."""
    from lsm_gnn.config import load_config
    from lsm_gnn.multidevice.launch import run_multi_device

    s = _sizes(a)
    root, reader, notes = _dataset_for_training(a)
    over = {"dataset.path": str(root), "distributed.devices": 2, "distributed.mode": "shared",
            "distributed.backend": "gloo", "distributed.timeout_s": 120.0, "train.device": DEVICE,
            "train.epochs": 1, "train.warmup_iters": s["md_warmup"], "train.timed_iters": s["md_timed"],
            "train.eval": False, "storage.reader": reader, "cache.enabled": True,
            "cache.capacity_fraction": CACHE_FRACTION}
    rec = run_multi_device(load_config(None, over), progress=False)
    m = rec.get("metrics", {})
    md = m.get("multidevice", {})
    out = {"ran": "2 ranks (torch.multiprocessing spawn), shared cache (owner v % 2), backend gloo, "
                  "both ranks' models on cuda:0, rows exchanged through host memory (all_to_all over gloo); "
                  "NCCL is not used: it refuses two ranks on one GPU (Duplicate GPU detected)",
           "status": rec.get("status"), "config": over, "notes": notes,
           "backend": md.get("backend"), "devices": md.get("devices"), "wall_s": md.get("wall_s"),
           "epoch_steady_s": m.get("time", {}).get("epoch_steady_s"), "hit_rate": m.get("hit_rate"),
           "exchange_bytes_per_iteration": md.get("exchange_bytes_per_iteration"),
           "exchange_seconds_per_iteration": md.get("exchange_seconds_per_iteration"),
           "rows": m.get("rows"), "traffic": m.get("traffic")}
    if rec.get("status") != "complete":
        out["error"] = f"run record status {rec.get('status')!r}: {rec.get('failure')}"
    print(f"[multidevice] {out['ran'][:60]}...: steady epoch {out['epoch_steady_s']} s, "
          f"hit rate {out['hit_rate']}", flush=True)
    return out


STEPS = {"env": step_env, "engine": step_engine, "gather": step_gather, "dataset": step_dataset,
         "train": step_train, "multidevice": step_multidevice}


def _step_main(a) -> int:
    """Child process: run one step, write its result (or its error) as JSON."""
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DGLBACKEND", "pytorch")
    t0 = time.perf_counter()
    try:
        res = STEPS[a.step](a)
    except BaseException as e:  # noqa: BLE001 - every failure becomes the step's error
        traceback.print_exc()
        res = {"error": f"{type(e).__name__}: {e}".strip()[:2000], "traceback": traceback.format_exc()[-4000:]}
        if isinstance(e, ModuleNotFoundError):
            res["missing_module"] = e.name
    res["seconds"] = round(time.perf_counter() - t0, 1)
    write_json_atomic(Path(a.step_out), res)
    return 1 if res.get("error") else 0


# =================================================================================================
# the parent
class Check:
    def __init__(self, args):
        self.args = args
        self.mode = "quick" if args.quick else "full"
        self.out = Path(args.out)
        self.t0 = time.monotonic()
        self.deadline = self.t0 + (args.budget or BUDGET_S[self.mode])
        self.report: dict = {
            "ok": False, "complete": False, "exit_status": None, "mode": self.mode,
            "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "argv": sys.argv[1:], "out": str(self.out), "versions": {}, "environment": {}, "tests": {},
            "benchmarks": {}, "targets": {}, "unverified": [], "elapsed_s": 0.0}

    def save(self) -> None:
        self.report["elapsed_s"] = round(time.monotonic() - self.t0, 1)
        write_json_atomic(self.out / "gpu_check.json", self.report)

    def unverified(self, what: str, why: str) -> None:
        self.report["unverified"].append({"what": what, "why": why})

    def step(self, name: str, limit: float) -> dict:
        left = self.deadline - time.monotonic()
        limit = min(limit, left)
        if limit < MIN_STEP_S:
            return {"error": f"not run: the check's time budget was spent ({left:.0f} s left)"}
        need = missing_modules(STEP_MODULES.get(name, []))
        if need:
            dists = " ".join(MODULE_DISTS.get(m, m) for m in need)
            return {"error": f"not run: missing module(s) {', '.join(need)}; " + WHEELS_HINT.format(dists=dists),
                    "missing_modules": need}
        res_path = self.out / "steps" / f"{name}.json"
        if res_path.exists():
            res_path.unlink()
        cmd = [sys.executable, str(Path(__file__).resolve()), "--step", name, "--step-out", str(res_path),
               "--data-dir", str(self.args.data_dir)] + (["--quick"] if self.args.quick else [])
        log = self.out / "steps" / f"{name}.log"
        rc, timed_out, secs = run_limited(cmd, limit, log)
        try:
            res = json.loads(res_path.read_text())
        except (OSError, ValueError):
            res = {}
        if timed_out:
            res["error"] = f"timed out after {limit:.0f} s (step limit); log: {log}"
        elif not res:
            res = {"error": f"step exited {rc} without a result; last lines:\n{_tail(log)}"}
        res["seconds"] = round(secs, 1)
        res["log"] = str(log)
        return res

    # ---- phases -------------------------------------------------------------------------------
    def env(self) -> bool:
        env = self.step("env", STEP_LIMIT_S[self.mode]["env"])
        self.report["versions"] = env.get("versions", {})
        needed = sorted({m for mods in STEP_MODULES.values() for m in mods} | {"click"})
        miss = missing_modules(needed)
        self.report["environment"] = {
            "missing_modules": miss, "gpu": bool(env.get("gpu")),
            "device_pool_module": (ROOT / "lsm_gnn/cache/device_pool.py").is_file(),
            "device_source_module": (ROOT / "lsm_gnn/cache/device_source.py").is_file()}
        if miss:
            dists = " ".join(MODULE_DISTS.get(m, m) for m in miss)
            self.report["environment"]["missing_hint"] = WHEELS_HINT.format(dists=dists)
            print(f"[env] missing modules: {', '.join(miss)} -- {WHEELS_HINT.format(dists=dists)}", flush=True)
        if env.get("error"):
            self.report["environment"]["env_step_error"] = env["error"]
        v = self.report["versions"]
        print(f"[env] python {v.get('python')}, torch {v.get('torch')} (CUDA {v.get('torch_cuda')}), "
              f"cupy {v.get('cupy')}, numba {v.get('numba')}, GPU {v.get('gpu_name')}", flush=True)
        if env.get("gpu"):
            return True
        why = "; ".join(env.get("why_no_gpu", [])) or env.get("error", "unknown")
        self.report["error"] = f"no GPU: {why}"
        for what in ["tests", *BENCH_STEPS]:
            self.unverified(what, "no GPU on this machine")
        return False

    def wheelhouse(self) -> None:
        wh = self.args.wheelhouse
        needed = sorted({m for mods in STEP_MODULES.values() for m in mods} | {"click"})
        miss = [m for m in missing_modules(needed) if m not in ("torch", "cupy", "numba", "numpy")]
        if not miss:
            self.report["environment"]["wheelhouse"] = "nothing missing: not used"
            return
        dists = [MODULE_DISTS.get(m, m) for m in miss]
        cmd = [sys.executable, "-m", "pip", "install", "--no-index", "--find-links", str(wh), *dists]
        env = dict(os.environ, PIP_BREAK_SYSTEM_PACKAGES="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
        log = self.out / "steps" / "wheelhouse.log"
        rc, timed_out, secs = run_limited(cmd, 120, log, env)
        importlib.invalidate_caches()
        still = missing_modules(miss)
        self.report["environment"]["wheelhouse"] = {"dir": str(wh), "installed": dists, "rc": rc,
                                                    "still_missing": still, "log": str(log)}
        self.report["environment"]["missing_modules"] = left = missing_modules(needed)
        if left:
            dists = " ".join(MODULE_DISTS.get(m, m) for m in left)
            self.report["environment"]["missing_hint"] = WHEELS_HINT.format(dists=dists)
        else:
            self.report["environment"].pop("missing_hint", None)
        print(f"[env] wheelhouse {wh}: pip install {' '.join(dists)} -> rc {rc}"
              + (f", still missing {still}" if still else ""), flush=True)

    def tests(self) -> None:
        if self.args.skip_tests:
            self.unverified("tests", "--skip-tests")
            return
        deadline = min(self.deadline, time.monotonic() + TESTS_SHARE * (self.deadline - self.t0))
        if missing_modules(["pytest"]):
            for rel in sorted(set(scan_gpu_test_files()) | set(EXPECTED_GPU_TESTS)):
                self.report["tests"][rel] = {"file": rel, "ok": False, "counts": None, "problems": [
                    "not run: pytest is not installed; " + WHEELS_HINT.format(dists="pytest")]}
            self.unverified("tests", "pytest is not installed in this Python")
            print("[tests] pytest is not installed: no GPU test ran", flush=True)
            return
        self.report["tests"] = run_tests(self.out / "tests", deadline, TEST_FILE_LIMIT_S[self.mode])
        for rel, r in self.report["tests"].items():
            if not r["ok"]:
                self.unverified(f"GPU tests of {rel}", "; ".join(r["problems"]))

    def benchmarks(self) -> None:
        limits = STEP_LIMIT_S[self.mode]
        for name in BENCH_STEPS:
            if name in self.args.skip:
                self.report["benchmarks"][name] = {"skipped": "--skip"}
                self.unverified(name, "--skip")
                continue
            if name in ("train", "multidevice") and self.report["benchmarks"].get("dataset", {}).get("error"):
                res = {"error": "not run: the dataset step failed"}
            else:
                print(f"[{name}] running (limit {min(limits[name], self.deadline - time.monotonic()):.0f} s) ...",
                      flush=True)
                res = self.step(name, limits[name])
            self.report["benchmarks"][name] = res
            if res.get("error"):
                print(f"[{name}] ERROR {res['error'].splitlines()[0][:300]}", flush=True)
                self.unverified(name, res["error"].splitlines()[0][:500])
            self.save()
        self.unverified("multidevice over NCCL", "one GPU: NCCL refuses two ranks on one GPU (Duplicate GPU "
                                                 "detected); the 2-rank run used gloo with both ranks on cuda:0")

    def finish(self) -> int:
        b = self.report["benchmarks"]
        for field, (step, op, target) in TARGETS.items():
            value = (b.get(step) or {}).get(field)
            met = None if not isinstance(value, (int, float)) else (value >= target if op == ">=" else value <= target)
            self.report["targets"][field] = {"step": step, "value": value, "op": op, "target": target, "met": met}
            if met is None:
                self.unverified(f"target {field} {op} {target}", f"not measured (step {step} did not produce it)")
        tests_ok = bool(self.report["tests"]) and all(r["ok"] for r in self.report["tests"].values())
        if self.args.skip_tests:
            tests_ok = True
        steps_ok = all(not r.get("error") for r in b.values())
        self.report["ok"] = tests_ok and steps_ok
        targets_met = all(t["met"] for t in self.report["targets"].values())
        self.report["all_targets_met"] = targets_met
        code = 0 if self.report["ok"] and targets_met else 1 if not self.report["ok"] else 3
        self.report["exit_status"] = code
        self.report["complete"] = True
        self.save()
        self.summary(code)
        return code

    def summary(self, code: int) -> None:
        print("=" * 100)
        print(f"gpu_check summary ({self.mode}, {self.report['elapsed_s']:.0f} s, GPU "
              f"{self.report['versions'].get('gpu_name')}):")
        for rel, r in self.report["tests"].items():
            c = r.get("counts") or {}
            status = "PASS" if r["ok"] else "FAIL"
            print(f"  test  {rel:<42} {status}  {c.get('passed', 0)} passed"
                  + ("" if r["ok"] else "  -- " + "; ".join(r["problems"])[:400]))
        for name, r in self.report["benchmarks"].items():
            if r.get("error"):
                print(f"  bench {name:<42} ERROR {r['error'].splitlines()[0][:300]}")
                continue
            if r.get("skipped"):
                print(f"  bench {name:<42} SKIPPED ({r['skipped']})")
                continue
            heads = [f for f, (step, _, _) in TARGETS.items() if step == name]
            if heads:
                t = self.report["targets"][heads[0]]
                val = "-" if t["value"] is None else f"{t['value']:.3g}"
                print(f"  bench {name:<42} {heads[0]} = {val} (target {t['op']} {t['target']}: "
                      f"{'met' if t['met'] else 'NOT met'})")
            else:
                extra = {"dataset": lambda r: f"{r.get('nodes')} nodes in {r.get('seconds')} s, O_DIRECT {r.get('o_direct')}",
                         "multidevice": lambda r: f"{r.get('backend')} x{r.get('devices')}, steady epoch "
                                                  f"{r.get('epoch_steady_s')} s"}.get(name, lambda r: "ok")
                print(f"  bench {name:<42} ok  {extra(r)}")
        tr = self.report["benchmarks"].get("train", {})
        if "hidden_fetch_fraction" in tr:
            print(f"  bench {'train: hidden_fetch_fraction':<42} {tr['hidden_fetch_fraction']}")
        verdict = {0: "ALL OK", 1: "FAILURES", 2: "NO GPU", 3: "OK BUT TARGETS MISSED"}[code]
        print(f"[summary] {verdict} (exit {code}); JSON: {self.out / 'gpu_check.json'}", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, help="folder for gpu_check.json and the logs (default: a new temp dir)")
    ap.add_argument("--quick", action="store_true", help="smaller sizes and a shorter budget")
    ap.add_argument("--budget", type=float, default=None,
                    help=f"seconds for the whole check (default {BUDGET_S['full']}, quick {BUDGET_S['quick']})")
    ap.add_argument("--data-dir", type=Path, default=None,
                    help="where the synthetic graph is generated (needs O_DIRECT for the cached runs; "
                         "default: data/gpu-check under the repository, removed at the end)")
    ap.add_argument("--keep-data", action="store_true", help="keep the generated graph")
    ap.add_argument("--wheelhouse", type=Path, default=None,
                    help="a folder of wheels: missing modules (pytest, pydantic, ...) are installed from it "
                         "(pip --no-index) before the check")
    ap.add_argument("--skip-tests", action="store_true")
    ap.add_argument("--skip", action="append", default=[], choices=BENCH_STEPS, help="skip a benchmark step")
    ap.add_argument("--step", choices=sorted(STEPS), help=argparse.SUPPRESS)
    ap.add_argument("--step-out", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.data_dir is None:
        args.data_dir = ROOT / "data" / "gpu-check"
    if args.step:
        return _step_main(args)
    default_out = args.out is None
    if default_out:
        args.out = Path(tempfile.mkdtemp(prefix="gpu-check-"))
    args.out.mkdir(parents=True, exist_ok=True)
    check = Check(args)
    check.save()
    try:
        if not check.env():
            check.report["exit_status"] = 2
            check.report["complete"] = True
            check.save()
            print(f"gpu_check: {check.report['error']}", file=sys.stderr)
            print(f"[summary] NO GPU (exit 2); JSON: {args.out / 'gpu_check.json'}", flush=True)
            return 2
        if args.wheelhouse is not None:
            check.wheelhouse()
        check.save()
        check.tests()
        check.save()
        check.benchmarks()
        return check.finish()
    finally:
        if not args.keep_data:  # the graph this check generated (and the owners' files beside it)
            shutil.rmtree(_dataset_root(args), ignore_errors=True)
            if args.data_dir == ROOT / "data" / "gpu-check":
                shutil.rmtree(args.data_dir, ignore_errors=True)
        if default_out:
            print(f"gpu_check: results in {args.out}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
