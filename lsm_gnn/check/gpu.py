"""`lsm-gnn check gpu --out DIR`: every GPU check of the project in one time-boxed run.

On a machine with a CUDA GPU (torch.cuda and CuPy), from the repository root (the GPU tests are in
tests/), in order, each in its own process with a time limit (a step that fails or runs out of time
records {"error": ...} and the later steps still run):

1. env: versions and the GPU (lsm_gnn.check.env); without a GPU the check stops here, exit 2.
   The env step also imports every step's module (`environment.imports`), so a module the GPU
   machine lacks shows there, before any GPU is needed; a step whose module did not import is not
   started (its error names the import).
2. tests: `pytest -m gpu` over tests/, each test's result written as it ends (one JSON line per
   event: lsm_gnn.check.pytest_results), so a run killed at its limit (TESTS_LIMIT_S, or a share
   TESTS_SHARE of a budget cut below the plan) keeps every finished test and names the one that
   was running. A skipped GPU test,
   no GPU test collected, a collection/import error or a module skipped while collecting (except
   for a missing OPTIONAL_TEST_PACKAGES) fails the check; a test that needs more GPUs than the
   machine has (`gpu(devices=2)`) is listed as unverified.
3. the steps (STEPS), each a function of a benchmark (lsm_gnn/bench/), only what the targets read:
   engine_sweep      lsm_gnn.bench.cache.gpu_engine_sweep: GpuCacheEngine vs CpuCacheEngine, the
                     headline case (hybrid + PVP) at ~21k / 81k / 315k requests a batch;
   zero_copy_gather  lsm_gnn.bench.cache.zero_copy_gather_vs_memcpy: 21k random 4 KiB rows read by
                     a warp-per-row kernel from mapped pinned host memory vs a pinned memcpy;
   dataset           a synthetic graph under --data-dir (removed at the end unless --keep-data);
   train_in_memory   lsm_gnn.bench.train.on_device: `bench train` with train.device=cuda and the
                     cached run's misses read from host memory (LSM-GNN without a disk vs the
                     all-on-GPU ideal);
   train             the same on that machine's disk (O_DIRECT where it works);
   disk_probe        lsm_gnn.bench.storage.probe_disk: raw random 4 KiB reads of the same file
                     (fio where installed, native AIO always);
   accelerator       lsm_gnn.accelerator.measure.measure_step: the real train step at 3 batch
                     sizes, the step model fitted to it, DIR/<gpu>-measured.yaml (a measured
                     profile; no target reads it).
4. the targets (TARGETS, issue 44), each computed from the steps' outputs (TARGET_VALUES); a
   target whose step did not run, failed or lacks what it needs is null with `why`.

DIR/gpu_check.json (rewritten atomically after every step, so a killed run still leaves one): ok,
complete, exit_status, versions, environment, tests, benchmarks (each with its `seconds`), targets,
durations_s, elapsed_s, unverified; DIR/<gpu>-measured.yaml (the accelerator step). The logs go to
LOGS (default DIR): LOGS/tests.log and tests.jsonl; LOGS/steps/<step>.log, .json
(tools/gpu-check.sh packs them into one archive).

Exit status: 0 everything ran, every test passed and every target was met; 1 a test or a step
failed (or ran out of time); 2 no GPU; 3 everything ran and passed but a target was missed.
Imports only the standard library at module level.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from lsm_gnn.check.env import FEWER_DEVICES, NO_GPU, missing_modules

TESTS_LIMIT_S = {"full": 85, "quick": 60}  # `pytest -m gpu`: 53-74 s on the three H200 calls (reports/gpu/)
TESTS_SHARE = 0.45                         # and at most this share of a budget cut below the plan
# test modules that need these skip while collecting where they are missing (no GPU test lives in
# one: tests/test_gpu_check.py); a module skipped for anything else fails the check
OPTIONAL_TEST_PACKAGES = ("dgl",)
ENV_LIMIT_S = 20                           # 4.2-4.9 s on the H200 calls (it imports every step's module)
MIN_STEP_S = 10                            # a step is not started with less time left than this
CACHE_FRACTION = 0.10
TRAIN_NEEDS = ("torch", "numba", "pydantic", "yaml", "tqdm", "jsonschema", "psutil")   # the train steps' modules


@dataclass(frozen=True)
class Step:
    target: str                      # "module:function", called with the step's keyword arguments
    limit_s: dict                    # per mode
    kwargs: dict                     # per mode
    needs: tuple = ("torch",)        # modules it imports
    dataset: bool = False            # gets dataset= the dataset step's graph
    extra: dict = field(default_factory=dict)


def _train_step(full_s: int, quick_s: int, **extra) -> Step:
    """A step of `bench train` on the dataset step's graph with train.device=cuda
    (lsm_gnn.bench.train.on_device; `extra`: its reader or more overrides), at most `full_s` /
    `quick_s` seconds. 10 + 20 iterations: the H200 calls' 15 + 30 took 13-30 s a step."""
    return Step("lsm_gnn.bench.train:on_device", {"full": full_s, "quick": quick_s},
                {"full": dict(warmup=10, timed=20), "quick": dict(warmup=6, timed=12)}, needs=TRAIN_NEEDS,
                dataset=True, extra={"device": "cuda", "cache_fraction": CACHE_FRACTION, **extra})


# In this order, each limit about 2-3x what the step took on the H200 calls (reports/gpu/), so that
# the whole call (install, env, tests, steps, packing) fits tools/gpu-check.sh's default budget,
# under 5 minutes with room for a rerun in 15 minutes of device time (tests/test_gpu_check.py).
# Only what the targets read runs, and the accelerator's measured step: the 5-policy engine table,
# the device gather, the 2-rank run and LSM-GNN with the GPU engine on the disk are left to their
# benchmarks (`lsm-gnn check gpu` ran them through 2026-12-04: reports/gpu/).
STEPS = {
    # the engine's headline case (hybrid + PVP) at 3 batch sizes, ~21k / 81k / 315k requests a batch
    # (5.9-7.6 s): its fixed time a batch, its ratio at ~81k and its host syncs
    "engine_sweep": Step("lsm_gnn.bench.cache:gpu_engine_sweep", {"full": 20, "quick": 15},
                         {"full": dict(batch_sizes=[25_000, 100_000, 400_000]),
                          "quick": dict(batch_sizes=[25_000, 100_000], batches=5)}, needs=("numba", "cupy")),
    # a batch's misses (21k rows of 4 KiB) gathered zero-copy from mapped pinned memory vs a memcpy
    "zero_copy_gather": Step("lsm_gnn.bench.cache:zero_copy_gather_vs_memcpy", {"full": 15, "quick": 12},
                             {"full": dict(rows=21_000, table_rows=150_000, reps=10),
                              "quick": dict(rows=21_000, table_rows=50_000, reps=5)}, needs=("cupy",)),
    "dataset": Step("lsm_gnn.check.gpu:make_dataset", {"full": 15, "quick": 12},
                    {"full": dict(nodes=150_000), "quick": dict(nodes=50_000)}, needs=("numba", "tqdm")),
    # LSM-GNN without a disk (its misses read from host memory) vs the all-on-GPU ideal (13.1 s)
    "train_in_memory": _train_step(30, 22, reader="memory"),
    # LSM-GNN on that machine's disk (O_DIRECT where it works; 19.6-29.5 s), then a raw probe of
    # the same file: the storage rate LSM-GNN achieved against the disk's
    "train": _train_step(30, 22),
    "disk_probe": Step("lsm_gnn.bench.storage:probe_disk", {"full": 12, "quick": 10},
                       {"full": dict(seconds=2.0), "quick": dict(seconds=1.0)}, needs=("numba",), dataset=True),
    # no target reads it, but it is how a GPU's train step becomes a measured accelerator profile
    # (DIR/<gpu>-measured.yaml): last, so a slow call loses it first; 8-14 s on the H200 calls
    "accelerator": Step("lsm_gnn.accelerator.measure:measure_step", {"full": 15, "quick": 12},
                        {"full": dict(batch_sizes=[128, 512, 1024], warmup=3, repeats=10),
                         "quick": dict(batch_sizes=[128, 1024], warmup=2, repeats=5)},
                        needs=("torch", "pydantic", "yaml"), extra={"device": "cuda"}),
}
# the whole check, env and tests included: the sum of its parts' limits (a longer --budget leaves slack)
BUDGET_S = {m: ENV_LIMIT_S + TESTS_LIMIT_S[m] + sum(s.limit_s[m] for s in STEPS.values()) for m in ("full", "quick")}

# headline numbers (issue 44): field -> (step or steps whose output it is computed from, op, target);
# each value is computed from the steps' outputs by TARGET_VALUES below, null with why when a step
# did not run or did not produce what it needs
HEADLINE_REQUESTS = 81_000       # the engine's headline batch: ~81k requests (distinct ids) with PVP
HEADLINE_TOLERANCE = 0.25        # the sweep point used: the nearest within +-25 % of it
TARGETS = {
    "engine_fixed_ms": ("engine_sweep", "<=", 0.10),
    "gpu_vs_cpu_requests_ratio": ("engine_sweep", ">=", 50.0),
    "engine_host_syncs_per_step": ("engine_sweep", "<=", 0),
    "zero_copy_gather_vs_memcpy": ("zero_copy_gather", ">=", 0.8),
    "no_disk_epoch_vs_ideal": ("train_in_memory", "<=", 1.5),
    "fetch_hidden_fraction": ("train_in_memory", ">=", 0.7),
    "disk_achieved_vs_probe": (("train", "disk_probe"), ">=", 0.9),
}


class MissingOutput(ValueError):
    """A step's output lacks what a target is computed from."""


def _need(res: dict, *path):
    cur = res
    for key in path:
        if not isinstance(cur, dict) or cur.get(key) is None:
            raise MissingOutput(f"no {'.'.join(map(str, path))} in its output")
        cur = cur[key]
    return cur


def line_fit(xs, ys) -> dict:
    """Least-squares line y = intercept + slope x (plain Python); at least 2 distinct x."""
    xs, ys = [float(x) for x in xs], [float(y) for y in ys]
    n = len(xs)
    if n < 2 or len(set(xs)) < 2 or len(ys) != n:
        raise MissingOutput(f"a line needs 2 or more points at distinct x, got {n}")
    mx, my = sum(xs) / n, sum(ys) / n
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    intercept = my - slope * mx
    return {"intercept": intercept, "slope": slope,
            "max_abs_residual": max(abs(y - intercept - slope * x) for x, y in zip(xs, ys))}


def _sweep_points(sweep: dict) -> list[dict]:
    points = _need(sweep, "points")
    if not points:
        raise MissingOutput("no points in its output")
    return points


def engine_fixed_ms(sweep: dict) -> tuple[float, dict]:
    """The intercept of the GPU engine's milliseconds a batch fitted against the requests a batch
    over the sweep's points: the part of a batch's time that does not grow with the batch."""
    pts = _sweep_points(sweep)
    fit = line_fit([_need(p, "requests_per_batch") for p in pts], [_need(p, "gpu_ms_per_batch") for p in pts])
    return fit["intercept"], {"fit": "gpu_ms_per_batch = fixed + per_request x requests_per_batch (least squares)",
                              "per_request_ns": fit["slope"] * 1e6, "max_abs_residual_ms": fit["max_abs_residual"],
                              "points": [[p["requests_per_batch"], p["gpu_ms_per_batch"]] for p in pts]}


def gpu_vs_cpu_requests_ratio(sweep: dict) -> tuple[float, dict]:
    """The GPU engine over the CPU engine (numba, one core) at the sweep's point nearest ~81k
    requests a batch with PVP (HEADLINE_REQUESTS, within HEADLINE_TOLERANCE)."""
    pts = [p for p in _sweep_points(sweep) if p.get("pvp") and p.get("requests_per_batch")]
    near = [p for p in pts if abs(p["requests_per_batch"] / HEADLINE_REQUESTS - 1) <= HEADLINE_TOLERANCE]
    if not near:
        raise MissingOutput(f"no point with PVP within {HEADLINE_TOLERANCE:.0%} of {HEADLINE_REQUESTS:,} requests a "
                            f"batch (it has {[round(p['requests_per_batch']) for p in pts]})")
    p = min(near, key=lambda q: abs(q["requests_per_batch"] - HEADLINE_REQUESTS))
    return _need(p, "gpu_vs_cpu_requests_ratio"), {"requests_per_batch": p["requests_per_batch"],
                                                   "policy": p.get("policy"), "gpu_ms_per_batch": p.get("gpu_ms_per_batch"),
                                                   "cpu_ms_per_batch": p.get("cpu_ms_per_batch")}


def engine_host_syncs_per_step(sweep: dict) -> tuple[float, dict]:
    """The most host reads inside one engine step over the sweep's points (the engine's own count,
    GpuCacheEngine.sync_stats; a CUDA graph capture fails on one), with the share of steps replayed
    as a captured graph."""
    pts = _sweep_points(sweep)
    return max(_need(p, "engine_host_syncs_per_step") for p in pts), {
        "graph_step_fraction": min((p.get("engine_graph_step_fraction") for p in pts
                                    if p.get("engine_graph_step_fraction") is not None), default=None),
        "graph_errors": sorted({str(p["engine_graph_error"]) for p in pts if p.get("engine_graph_error")})}


def zero_copy_gather_vs_memcpy(zc: dict) -> tuple[float, dict]:
    """The pinned memcpy's time over the zero-copy gather's for the same bytes."""
    gather, memcpy = _need(zc, "gather_ms"), _need(zc, "memcpy_ms")
    return memcpy / gather, {"gather_gb_per_s": zc.get("gather_gb_per_s"), "memcpy_gb_per_s": zc.get("memcpy_gb_per_s"),
                             "rows": zc.get("rows"), "row_bytes": zc.get("row_bytes")}


def _no_disk(tr: dict) -> dict:
    if _need(tr, "reader") != "memory":
        raise MissingOutput(f"its run read a disk (reader {tr['reader']!r}), not host memory")
    return tr


def no_disk_epoch_vs_ideal(tr: dict) -> tuple[float, dict]:
    """LSM-GNN's steady epoch with its misses read from host memory over the all-on-GPU ideal's."""
    lsm, ideal = _need(_no_disk(tr), "lsm_epoch_steady_s"), _need(tr, "memory_epoch_steady_s")
    return lsm / ideal, {"lsm_epoch_steady_s": lsm, "ideal_epoch_steady_s": ideal}


def fetch_hidden_fraction(tr: dict) -> tuple[float, dict]:
    """The share of LSM-GNN's fetch hidden behind training, without a disk (the record's
    hidden_fetch_fraction)."""
    return _need(_no_disk(tr), "hidden_fetch_fraction"), {}


def disk_achieved_vs_probe(tr: dict, probe: dict) -> tuple[float, dict]:
    """LSM-GNN's storage rate on the disk (4 KiB blocks read per second of its storage fetch:
    storage bytes an iteration / block / per_iteration.fetch_storage) over the raw probe's random
    4 KiB IOPS of the same file."""
    if _need(tr, "reader") == "memory":
        raise MissingOutput("its run read host memory, not the disk")
    lsm = _need(tr, "bench", "systems", "lsm")
    block = (lsm.get("storage_path") or {}).get("block_size") or 4096
    per_iter, secs = _need(tr, "lsm_storage_bytes_per_iter"), _need(lsm, "per_iteration", "fetch_storage")
    if not per_iter or not secs:
        raise MissingOutput("its run read nothing from storage")
    achieved, raw = per_iter / block / secs, _need(probe, "iops")
    return achieved / raw, {"achieved_iops": achieved, "probe_iops": raw, "probe": probe.get("probe"),
                            "block_bytes": block, "storage_bytes_per_iter": per_iter, "fetch_storage_s_per_iter": secs}


TARGET_VALUES = {"engine_fixed_ms": engine_fixed_ms, "gpu_vs_cpu_requests_ratio": gpu_vs_cpu_requests_ratio,
                 "engine_host_syncs_per_step": engine_host_syncs_per_step,
                 "zero_copy_gather_vs_memcpy": zero_copy_gather_vs_memcpy,
                 "no_disk_epoch_vs_ideal": no_disk_epoch_vs_ideal, "fetch_hidden_fraction": fetch_hidden_fraction,
                 "disk_achieved_vs_probe": disk_achieved_vs_probe}


def target_steps(fname: str) -> tuple[str, ...]:
    step = TARGETS[fname][0]
    return (step,) if isinstance(step, str) else tuple(step)


def compute_target(fname: str, benchmarks: dict) -> dict:
    """The target's entry of gpu_check.json from the steps' outputs: value (null when a step did not
    run, failed or lacks what it needs, with `why`), met, and what it was computed from."""
    _, op, target = TARGETS[fname]
    steps = target_steps(fname)
    entry = {"step": steps[0] if len(steps) == 1 else list(steps), "op": op, "target": target, "value": None,
             "met": None}
    for name in steps:
        r = benchmarks.get(name)
        why = (f"step {name} did not run" if not r else f"step {name} was skipped ({r['skipped']})" if r.get("skipped")
               else f"step {name} failed: {str(r['error']).splitlines()[0][:300]}" if r.get("error") else None)
        if why:
            return {**entry, "why": why}
    try:
        value, detail = TARGET_VALUES[fname](*(benchmarks[n] for n in steps))
    except MissingOutput as e:
        return {**entry, "why": f"step {'/'.join(steps)}: {e}"}
    value = float(value)
    return {**entry, "value": value, "met": value >= target if op == ">=" else value <= target, "from": detail}


INSTALL_HINT = ('pip install ".[gpu,test]" (offline: `make gpu-carry` where PyPI is reachable, then tools/gpu-check.sh '
                "on the GPU machine; README, Running on GPUs)")


# ---- helpers -----------------------------------------------------------------------------------
def write_json_atomic(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(obj, f, indent=2, default=lambda o: float(o) if hasattr(o, "__float__") else repr(o))
            f.write("\n")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def run_limited(cmd: list[str], timeout: float, log_path: Path, cwd=None) -> tuple[int, bool, float]:
    """Run `cmd` in its own process group, stdout+stderr to `log_path`; kill the whole group
    (spawned ranks included) after `timeout` s. Returns (exit code, timed out, seconds)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, DGLBACKEND=os.environ.get("DGLBACKEND", "pytorch"), PYTHONUNBUFFERED="1")
    t0 = time.perf_counter()
    with open(log_path, "w") as log:
        p = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             start_new_session=True)
        try:
            rc, timed_out = p.wait(timeout=max(1.0, timeout)), False
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            rc, timed_out = p.wait(), True
            log.write(f"\n[check gpu] killed after {timeout:.0f} s (time limit)\n")
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(p.pid, signal.SIGKILL)  # leftovers of a step that exited (e.g. orphaned ranks)
    return rc, timed_out, time.perf_counter() - t0


def _tail(path: Path, n: int = 15) -> str:
    try:
        return "\n".join([ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()][-n:])
    except OSError:
        return ""


# ---- the GPU tests: pytest -m gpu, judged strictly ----------------------------------------------
def _first_line(text: str) -> str:
    return next((ln for ln in text.splitlines() if ln.strip()), "")[:300]


def results_counts(path: Path) -> dict | None:
    """Counts of the JSON lines lsm_gnn.check.pytest_results wrote (None: no file): tests, passed,
    failed, errors (collection errors included), skipped, with names and reasons; `running`: the
    test that started and never finished (the one a kill at the time limit interrupted);
    `skipped_modules`: modules skipped while collecting; `durations_s`: each test's seconds."""
    try:
        lines = Path(path).read_text(errors="replace").splitlines()
    except OSError:
        return None
    rank = {None: 0, "passed": 1, "skipped": 2, "failed": 3, "error": 3}
    tests: dict = {}
    collect_errors, skipped_modules = [], []
    for line in lines:
        try:
            ev = json.loads(line)
        except ValueError:  # a line cut short by the kill
            continue
        kind, nodeid = ev.get("event"), ev.get("nodeid", "")
        if kind == "collect":
            entry = f"{nodeid}: {_first_line(ev.get('reason', ''))}"
            (collect_errors if ev.get("outcome") == "failed" else skipped_modules).append(entry)
            continue
        t = tests.setdefault(nodeid, {"outcome": None, "reason": "", "done": False, "seconds": 0.0})
        if kind != "report":
            continue
        when, outcome = ev.get("when"), ev.get("outcome")
        t["seconds"] += float(ev.get("duration") or 0.0)
        new = {"passed": "passed" if when == "call" else None, "skipped": "passed" if ev.get("xfail") else "skipped",
               "failed": "failed" if when == "call" else "error"}.get(outcome)
        if rank[new] > rank[t["outcome"]]:
            t["outcome"], t["reason"] = new, _first_line(ev.get("reason", ""))
        if when == "teardown":
            t["done"] = True
    out = {"tests": len(tests), "passed": 0, "failed": 0, "errors": len(collect_errors), "skipped": 0,
           "failed_tests": [], "error_tests": list(collect_errors), "skip_reasons": [], "running": None,
           "skipped_modules": skipped_modules, "durations_s": {}}
    for nodeid, t in tests.items():
        out["durations_s"][nodeid] = round(t["seconds"], 3)
        if not t["done"] and t["outcome"] in (None, "passed"):
            out["running"] = nodeid
            out["tests"] -= 1
            continue
        key, lst = {"passed": ("passed", None), "skipped": ("skipped", "skip_reasons"),
                    "failed": ("failed", "failed_tests"), "error": ("errors", "error_tests")}.get(
            t["outcome"] or "error", ("errors", "error_tests"))
        out[key] += 1
        if lst:
            out[lst].append(f"{nodeid}: {t['reason']}"[:300])
    return out


def judge_test_run(rc: int, counts: dict | None, timed_out: bool = False, timeout: float | None = None,
                   log_tail: str = "") -> tuple[list[str], list[str]]:
    """(problems, unverified) of the GPU tests' pytest run. Strict: a skip, no GPU test collected
    (exit 5), a collection or import error, a failure, a timeout all fail; a test skipped for
    needing more GPUs than the machine has is unverified."""
    problems: list[str] = []
    if timed_out:
        running = (counts or {}).get("running")
        problems.append((f"timed out after {timeout:.0f} s" if timeout else "timed out")
                        + (f" while {running} ran (the tests that had finished kept their results)" if running else ""))
    if counts is None:
        if "No module named pytest" in log_tail:
            problems.append(f"pytest is not installed in this Python; {INSTALL_HINT}")
        elif not timed_out:
            problems.append(f"pytest wrote no results (exit {rc}); see the log")
        return problems, []
    if rc == 5 or counts["tests"] == 0:
        problems.append("collected no GPU test (pytest exit 5): the selection matched nothing")
    if rc in (2, 3, 4):
        problems.append(f"pytest exit {rc}: " + {2: "interrupted (collection or import error)", 3: "internal error",
                                                 4: "usage error"}[rc])
    unexpected = [m for m in counts.get("skipped_modules", [])
                  if not any(f"could not import '{p}'" in m for p in OPTIONAL_TEST_PACKAGES)]
    if unexpected:
        problems.append(f"{len(unexpected)} test module(s) skipped while collecting: " + "; ".join(unexpected[:3]))
    if counts["errors"]:
        problems.append(f"{counts['errors']} error(s): " + "; ".join(counts["error_tests"][:3]))
    if counts["failed"]:
        problems.append(f"{counts['failed']} failed: " + "; ".join(counts["failed_tests"][:5]))
    devices = [s for s in counts["skip_reasons"] if FEWER_DEVICES in s]
    other = [s for s in counts["skip_reasons"] if FEWER_DEVICES not in s]
    if other:
        problems.append(f"{len(other)} GPU test(s) skipped: " + "; ".join(other[:3]))
    if rc not in (0, 2, 3, 4, 5) and not (counts["failed"] or counts["errors"] or timed_out):
        problems.append(f"pytest exit {rc}")
    return problems, devices


def run_gpu_tests(tests_dir: Path, out_dir: Path, timeout: float, selection=("-m", "gpu")) -> dict:
    """One pytest run of `selection` over `tests_dir` (from its parent, the repository root), with
    each test's result as a JSON line (tests.jsonl) and a log in out_dir."""
    tests_dir, out_dir = Path(tests_dir).resolve(), Path(out_dir)
    results, log = out_dir / "tests.jsonl", out_dir / "tests.log"
    out_dir.mkdir(parents=True, exist_ok=True)
    results.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-p", "lsm_gnn.check.pytest_results",
           f"--results-jsonl={results}", *selection, str(tests_dir)]
    rc, timed_out, secs = run_limited(cmd, timeout, log, cwd=tests_dir.parent)
    counts = results_counts(results)
    tail = _tail(log, 40)
    problems, devices = judge_test_run(rc, counts, timed_out, timeout, tail)
    lines = tail.splitlines()
    return {"selection": " ".join(selection), "tests_dir": str(tests_dir), "rc": rc, "timed_out": timed_out,
            "seconds": round(secs, 1), "counts": counts, "ok": not problems, "problems": problems,
            "needs_more_gpus": devices, "summary": lines[-1] if lines else "", "log": str(log), "results": str(results),
            "limit_s": round(timeout, 1)}


# ---- a step in its own process --------------------------------------------------------------------
def make_dataset(root: str, nodes: int, feature_dim: int = 1024) -> dict:
    """The synthetic graph the train steps read (IGB-like, 1024-dim float32 rows)."""
    from lsm_gnn.datasets.synthetic import generate
    from lsm_gnn.utils.machine import o_direct_works

    root = Path(root)
    root.parent.mkdir(parents=True, exist_ok=True)
    need = 2.2 * nodes * feature_dim * 4  # features, and room for the owners' files of a 2-rank run
    free = shutil.disk_usage(root.parent).free
    if free < need:
        return {"error": f"{root.parent}: {free / 2**30:.1f} GiB free, need {need / 2**30:.1f} GiB (--data-dir)"}
    ds = generate(root, nodes, seed=0, feature_dim=feature_dim, progress=False, overwrite=True)
    lay = ds.features()
    return {"path": str(root), "nodes": ds.num_nodes(), "edges": ds.num_edges(),
            "feature_bytes": lay.num_rows * lay.row_bytes, "o_direct": o_direct_works(Path(lay.path)),
            "via": "lsm_gnn.datasets.synthetic.generate (what `lsm-gnn dataset generate` calls)"}


def _child(target: str, kwargs_json: str, result: str) -> int:
    """In the step's process: call target(**kwargs), write its result (or its error) as JSON."""
    import importlib

    t0 = time.perf_counter()
    try:
        module, attr = target.split(":")
        res = dict(getattr(importlib.import_module(module), attr)(**json.loads(kwargs_json)))
    except BaseException as e:  # noqa: BLE001 - every failure becomes the step's error
        traceback.print_exc()
        res = {"error": f"{type(e).__name__}: {e}".strip()[:2000], "traceback": traceback.format_exc()[-4000:]}
        if isinstance(e, ModuleNotFoundError):
            res["missing_module"] = e.name
    res["seconds"] = round(time.perf_counter() - t0, 1)
    write_json_atomic(Path(result), res)
    return 1 if res.get("error") else 0


def run_step(name: str, target: str, kwargs: dict, limit: float, steps_dir: Path) -> dict:
    res_path, log = steps_dir / f"{name}.json", steps_dir / f"{name}.log"
    res_path.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "lsm_gnn.check.gpu", target, json.dumps(kwargs), str(res_path)]
    rc, timed_out, secs = run_limited(cmd, limit, log)
    try:
        res = json.loads(res_path.read_text())
    except (OSError, ValueError):
        res = {}
    if timed_out:
        res["error"] = f"timed out after {limit:.0f} s (step limit); log: {log}"
    elif not res:
        res = {"error": f"step exited {rc} without a result; last lines:\n{_tail(log)}"}
    res.update(seconds=round(secs, 1), log=str(log))
    return res


# ---- the check ---------------------------------------------------------------------------------------
class Check:
    def __init__(self, out: Path, *, quick=False, budget=None, tests_dir=None, data_dir=None, skip=(),
                 skip_tests=False, logs=None):
        self.out, self.mode = Path(out), "quick" if quick else "full"
        self.logs = Path(logs) if logs else self.out
        self.tests_dir = Path(tests_dir) if tests_dir else Path.cwd() / "tests"
        self.data_dir = Path(data_dir) if data_dir else Path.cwd() / "data" / "gpu-check"
        self.skip, self.skip_tests = set(skip), skip_tests
        self.t0 = time.monotonic()
        self.budget = float(budget or BUDGET_S[self.mode])
        self.deadline = self.t0 + self.budget
        self.report: dict = {
            "ok": False, "complete": False, "exit_status": None, "mode": self.mode,
            "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "argv": sys.argv[1:], "out": str(self.out),
            "logs": str(self.logs), "budget_s": self.budget, "versions": {}, "environment": {}, "tests": {},
            "benchmarks": {}, "targets": {}, "durations_s": {}, "unverified": [], "elapsed_s": 0.0}

    def save(self) -> None:
        self.report["elapsed_s"] = round(time.monotonic() - self.t0, 1)
        write_json_atomic(self.out / "gpu_check.json", self.report)

    def unverified(self, what: str, why: str) -> None:
        self.report["unverified"].append({"what": what, "why": why})

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def tests_limit(self) -> float:
        """The GPU tests' limit: TESTS_LIMIT_S, or TESTS_SHARE of a budget cut below the plan."""
        return min(TESTS_LIMIT_S[self.mode], TESTS_SHARE * self.budget, self.left())

    def dataset_root(self) -> Path:
        return self.data_dir / f"synthetic-{STEPS['dataset'].kwargs[self.mode]['nodes']}"

    def dataset_ok(self) -> bool:
        d = self.report["benchmarks"].get("dataset") or {}
        return bool(d) and not d.get("error") and not d.get("skipped")

    def env(self) -> bool:
        modules = sorted({s.target.split(":")[0] for s in STEPS.values()})
        res = run_step("env", "lsm_gnn.check.env:report", {"modules": modules}, min(ENV_LIMIT_S, self.left()),
                       self.logs / "steps")
        self.report["versions"] = res.get("versions", {})
        self.report["durations_s"]["env"] = res["seconds"]
        needed = sorted({m for s in STEPS.values() for m in s.needs} | {"pytest", "click"})
        self.report["environment"] = {"missing_modules": missing_modules(needed), "gpu_devices": res.get("devices", 0),
                                      "kernel_sources": res.get("kernel_sources"), "imports": res.get("imports", {})}
        bad = {m: e for m, e in self.report["environment"]["imports"].items() if e != "ok"}
        for m, e in bad.items():
            print(f"[env] import {m} FAILED: {e.splitlines()[-1][:300] if e else ''}", flush=True)
        if self.report["environment"]["missing_modules"]:
            self.report["environment"]["missing_hint"] = INSTALL_HINT
        v = self.report["versions"]
        print(f"[env] python {v.get('python')}, torch {v.get('torch')} (CUDA {v.get('torch_cuda')}), "
              f"cupy {v.get('cupy')}, GPU {v.get('gpu_name')}", flush=True)
        if res.get("devices"):
            return True
        self.report["error"] = f"no GPU: {NO_GPU}: {res.get('why') or res.get('error', 'unknown')}"
        for what in ["tests", *STEPS]:
            self.unverified(what, "no GPU on this machine")
        return False

    def tests(self) -> None:
        if self.skip_tests:
            self.unverified("tests", "--skip-tests")
            return
        if not self.tests_dir.is_dir():
            r = {"ok": False, "problems": [f"no tests folder at {self.tests_dir}: run the check from the repository "
                                           "root or pass --tests"]}
        elif missing_modules(["pytest"]):
            r = {"ok": False, "problems": [f"pytest is not installed; {INSTALL_HINT}"]}
        else:
            print("[tests] pytest -m gpu ...", flush=True)
            r = run_gpu_tests(self.tests_dir, self.logs, self.tests_limit())
            self.report["durations_s"]["tests"] = r["seconds"]
            for s in r["needs_more_gpus"]:
                self.unverified(s.split(":")[0], s.split(": ", 1)[-1])
        self.report["tests"] = r
        c = r.get("counts") or {}
        print(f"[tests] {'PASS' if r['ok'] else 'FAIL'} {c.get('passed', 0)} passed, {c.get('failed', 0)} failed, "
              f"{c.get('skipped', 0)} skipped, {c.get('errors', 0)} errors"
              + ("" if r["ok"] else " -- " + "; ".join(r["problems"])), flush=True)
        if not r["ok"]:
            self.unverified("GPU tests", "; ".join(r["problems"]))

    def steps(self) -> None:
        imports = self.report["environment"].get("imports") or {}
        for name, s in STEPS.items():
            limit = min(s.limit_s[self.mode], self.left())
            need = missing_modules(s.needs)
            if name in self.skip:
                res = {"skipped": "--skip"}
            elif limit < MIN_STEP_S:
                res = {"error": f"not run: the check's time budget was spent ({self.left():.0f} s left)"}
            elif need:
                res = {"error": f"not run: missing module(s) {', '.join(need)}; {INSTALL_HINT}"}
            elif imports.get(s.target.split(":")[0], "ok") != "ok":  # the env step's probe
                res = {"error": f"not run: {s.target.split(':')[0]} does not import here: "
                                f"{imports[s.target.split(':')[0]].strip().splitlines()[-1][:300]}; {INSTALL_HINT}"}
            elif s.dataset and not self.dataset_ok():
                res = {"error": "not run: the dataset step failed or was skipped"}
            else:
                kwargs = {**s.kwargs[self.mode], **s.extra}
                if name == "accelerator":
                    kwargs["out_dir"] = str(self.out)
                if name == "dataset":
                    kwargs["root"] = str(self.dataset_root())
                if s.dataset:
                    kwargs["dataset"] = str(self.dataset_root())
                print(f"[{name}] running (limit {limit:.0f} s) ...", flush=True)
                res = run_step(name, s.target, kwargs, limit, self.logs / "steps")
                self.report["durations_s"][name] = res["seconds"]
            self.report["benchmarks"][name] = res
            if res.get("error"):
                print(f"[{name}] ERROR {res['error'].splitlines()[0][:300]}", flush=True)
                self.unverified(name, res["error"].splitlines()[0][:500])
            elif res.get("skipped"):
                self.unverified(name, "--skip")
            self.save()

    def finish(self) -> int:
        b = self.report["benchmarks"]
        for fname, (_, op, target) in TARGETS.items():
            t = self.report["targets"][fname] = compute_target(fname, b)
            if t["met"] is None:
                self.unverified(f"target {fname} {op} {target}", f"not measured: {t['why']}")
        tests_ok = self.skip_tests or bool(self.report["tests"].get("ok"))
        self.report["ok"] = tests_ok and all(not r.get("error") for r in b.values())
        met = all(t["met"] for t in self.report["targets"].values())
        self.report["all_targets_met"] = met
        code = 1 if not self.report["ok"] else 0 if met else 3
        self.report.update(exit_status=code, complete=True)
        acc = b.get("accelerator") or {}
        if acc.get("profile_path"):
            self.report["accelerator_profile"] = {"path": acc["profile_path"], "step": acc.get("step")}
        self.save()
        self.summary(code)
        return code

    def summary(self, code: int) -> None:
        print("=" * 100)
        print(f"check gpu ({self.mode}, {self.report['elapsed_s']:.0f} s, GPU {self.report['versions'].get('gpu_name')}):")
        t = self.report["tests"]
        if t:
            print(f"  tests -m gpu  {'PASS' if t['ok'] else 'FAIL'}  {(t.get('counts') or {}).get('passed', 0)} passed"
                  + ("" if t["ok"] else "  -- " + "; ".join(t["problems"])[:400]))
        for name, r in self.report["benchmarks"].items():
            state = "ERROR " + r["error"].splitlines()[0][:200] if r.get("error") else \
                "SKIPPED" if r.get("skipped") else "ok"
            heads = [f"{f} = {self.report['targets'][f]['value']} (target {op} {tv})"
                     for f, (_, op, tv) in TARGETS.items() if target_steps(f)[-1] == name]
            print(f"  {name:<12}  {state}  {r.get('seconds', '-')} s  " + "; ".join(heads))
        if self.report.get("accelerator_profile"):
            print(f"  measured accelerator profile: {self.report['accelerator_profile']['path']}")
        verdict = {0: "ALL OK", 1: "FAILURES", 2: "NO GPU", 3: "OK BUT TARGETS MISSED"}[code]
        print(f"[summary] {verdict} (exit {code}); JSON: {self.out / 'gpu_check.json'}", flush=True)


def run_check(out: Path, *, keep_data: bool = False, **kw) -> int:
    """The whole check; returns its exit status (0, 1, 2, 3)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    check = Check(out, **kw)
    check.save()
    try:
        if not check.env():
            check.report.update(exit_status=2, complete=True)
            check.save()
            print(f"lsm-gnn check gpu: {check.report['error']}", file=sys.stderr)
            print(f"[summary] NO GPU (exit 2); JSON: {out / 'gpu_check.json'}", flush=True)
            return 2
        check.save()
        check.tests()
        check.save()
        check.steps()
        return check.finish()
    finally:
        if not keep_data:  # the graph this check generated (and the owners' files beside it)
            shutil.rmtree(check.dataset_root(), ignore_errors=True)
            with contextlib.suppress(OSError):
                check.data_dir.rmdir()


if __name__ == "__main__":
    sys.exit(_child(*sys.argv[1:4]))
