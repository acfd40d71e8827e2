#!/usr/bin/env python3
"""Every GPU check of the project in one run, for a session that has a GPU machine (minutes).

Usage, from the repository root, on a machine with a CUDA GPU and CuPy (installs nothing and
imports no DGL, so it runs on the bare GPU image: Python 3.12, torch+cu130, cupy-cuda13x, numba):

    PYTHONPATH=. python3 cuda/gpu_check.py [--out DIR] [--quick]

1. GPU tests: tests/test_cache_gpu.py (the emulated cases deselected: they need no GPU),
   tests/test_dist_*gpu*.py and tests/test_storage_gpu.py, each file in its own pytest run with a
   time limit; a file that cannot be imported there is reported, not hidden;
2. kernel benchmark: GpuCacheEngine against CpuCacheEngine replaying the same synthetic skewed
   trace (requests per second, speedup), and a check that their per-batch counts are equal;
3. a summary; with --out, summary.json and one pytest log per file under DIR.
Exit status 0 only if every test file passed (or had no tests) and every benchmark agreed.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEST_FILES = ["tests/test_cache_gpu.py", *sorted(glob.glob(str(ROOT / "tests/test_dist_*gpu*.py"))),
              "tests/test_storage_gpu.py"]


def run_tests(out: Path | None, timeout: int) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    results = {}
    for f in TEST_FILES:
        rel = os.path.relpath(f, ROOT)
        if not (ROOT / rel).is_file():
            continue
        cmd = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", rel]
        if rel.endswith("test_cache_gpu.py"):
            cmd += ["-k", "not emulated"]
        t0 = time.perf_counter()
        try:
            p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
            rc, log = p.returncode, p.stdout + p.stderr
        except subprocess.TimeoutExpired as exc:
            rc, log = 124, f"timed out after {timeout} s\n{exc.stdout or ''}"
        lines = [ln for ln in log.strip().splitlines() if ln.strip()]
        summary = lines[-1] if lines else ""
        results[rel] = {"rc": rc, "ok": rc in (0, 5), "summary": summary,
                        "seconds": round(time.perf_counter() - t0, 1)}
        print(f"[tests] {rel}: rc={rc} {summary}", flush=True)
        if out is not None:
            (out / (Path(rel).stem + ".log")).write_text(log)
        elif rc not in (0, 5):
            print(log[-4000:])
    return results


def skewed_trace(num_rows: int, batches: int, batch: int, seed: int = 0):
    """Power-law popularity over a random permutation of the ids (a few hot rows, a long tail)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    perm = rng.permutation(num_rows)
    idx = (num_rows * rng.random(batches * batch) ** 3).astype(np.int64)
    flat = perm[np.minimum(idx, num_rows - 1)]
    offsets = np.arange(0, batches * batch + 1, batch, dtype=np.int64)
    return flat, offsets


def bench(quick: bool) -> list[dict]:
    import cupy as cp
    import numpy as np

    from lsm_gnn.cache.engine import COUNT_NAMES, CpuCacheEngine
    from lsm_gnn.cache.gpu_engine import GpuCacheEngine

    num_rows, batches, batch = (400_000, 12, 20_000) if quick else (4_000_000, 40, 200_000)
    capacity = num_rows // 10
    flat, offsets = skewed_trace(num_rows, batches, batch)
    static = np.random.default_rng(1).integers(0, 256, num_rows).astype(np.uint8)
    cases = [("hybrid", True), ("hybrid", False), ("lru", False), ("sieve", False)]
    small_flat, small_off = skewed_trace(5000, 3, 500)
    results = []
    for policy, pvp in cases:
        kw = dict(ways=32, policy=policy, window=8, pvp=pvp, victim_depth=32768)
        # warm-up: numba compilation, NVRTC compilation, CuPy's scan/sort kernels
        CpuCacheEngine(500, 5000, static[:5000], **kw).replay(small_flat, small_off)
        GpuCacheEngine(500, 5000, static[:5000], **kw).replay(small_flat, small_off)
        cp.cuda.Device().synchronize()
        cpu = CpuCacheEngine(capacity, num_rows, static, **kw)
        t0 = time.perf_counter()
        out_c = cpu.replay(flat, offsets)
        t_cpu = time.perf_counter() - t0
        gpu = GpuCacheEngine(capacity, num_rows, static, **kw)
        flat_dev = cp.asarray(flat)
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        out_g = gpu.replay(flat_dev, offsets)
        cp.cuda.Device().synchronize()
        t_gpu = time.perf_counter() - t0
        same = bool(np.array_equal(out_c, out_g))
        tot = dict(zip(COUNT_NAMES, out_c.sum(axis=0).tolist()))
        n = int(len(flat))
        r = {"policy": gpu.policy_name, "requests": n, "batches": batches, "capacity_lines": capacity,
             "cpu_requests_per_s": n / t_cpu, "gpu_requests_per_s": n / t_gpu,
             "gpu_ms_per_batch": 1e3 * t_gpu / batches, "speedup_gpu_vs_cpu": t_cpu / t_gpu,
             "hit_rate": tot["hits"] / max(tot["distinct"], 1), "counts_equal": same}
        results.append(r)
        print(f"[bench] {r['policy']:<10} cpu {r['cpu_requests_per_s'] / 1e6:7.2f} M req/s  "
              f"gpu {r['gpu_requests_per_s'] / 1e6:7.2f} M req/s  ({r['gpu_ms_per_batch']:.2f} ms/batch)  "
              f"speedup {r['speedup_gpu_vs_cpu']:.2f}x  hit rate {r['hit_rate']:.3f}  "
              f"counts {'equal' if same else 'DIFFER'}", flush=True)
    return results


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, help="folder for summary.json and the pytest logs")
    ap.add_argument("--quick", action="store_true", help="a smaller benchmark trace")
    ap.add_argument("--test-timeout", type=int, default=240, help="seconds per test file")
    ap.add_argument("--skip-tests", action="store_true")
    ap.add_argument("--skip-bench", action="store_true")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
    summary: dict = {"python": sys.version.split()[0]}
    try:
        import cupy as cp

        summary["gpu"] = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
        summary["cupy"] = cp.__version__
    except Exception as exc:  # no point in going on
        print(f"gpu_check: no usable CuPy/GPU here ({type(exc).__name__}: {exc})", file=sys.stderr)
        return 2
    print(f"[env] python {summary['python']}, cupy {summary['cupy']}, {summary['gpu']}", flush=True)
    ok = True
    if not args.skip_tests:
        summary["tests"] = run_tests(args.out, args.test_timeout)
        ok &= all(r["ok"] for r in summary["tests"].values())
    if not args.skip_bench:
        try:
            summary["bench"] = bench(args.quick)
            ok &= all(r["counts_equal"] for r in summary["bench"])
        except Exception as exc:
            import traceback

            traceback.print_exc()
            summary["bench_error"] = f"{type(exc).__name__}: {exc}"
            ok = False
    summary["ok"] = ok
    if args.out is not None:
        (args.out / "summary.json").write_text(json.dumps(summary, indent=2))
    print(f"[summary] {'ALL OK' if ok else 'FAILURES'}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
