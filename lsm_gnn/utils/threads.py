"""The thread-count variables of the native libraries, pinned for every worker process a timed run
starts, whatever the caller's environment says.

Why: Snakemake sets OMP_NUM_THREADS, MKL_NUM_THREADS, OPENBLAS_NUM_THREADS, GOTO_NUM_THREADS,
VECLIB_MAXIMUM_THREADS and NUMEXPR_NUM_THREADS to a job's `threads` (snakemake/shell.py), and the
workers inherit them. On the 2-core VM the same Dist-DGL command (synthetic-small, batch 128,
2 machines x 2 trainers, 2026-12-01) took 147-171 s per steady epoch by hand and 213-231 s with
those variables at 2; MKL_NUM_THREADS=2 alone gave 213 s (RPC sampling 42 ms per iteration
instead of 17-20 ms): four trainers and two servers asked for twice the cores there are. A run's
time must not depend on who started it, so the harness sets the variables itself.
"""

from __future__ import annotations

import os
from contextlib import contextmanager

THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS",
               "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")


def thread_env(threads: int) -> dict[str, str]:
    """Every thread-count variable at `threads` (an environment fragment for a child process)."""
    if threads < 1:
        raise ValueError(f"threads must be at least 1, got {threads}")
    return {k: str(int(threads)) for k in THREAD_VARS}


@contextmanager
def pinned_thread_env(threads: int):
    """os.environ with every thread-count variable at `threads` while processes are started inside
    (multiprocessing's spawn copies the parent's environment); the caller's values come back after."""
    saved = {k: os.environ.get(k) for k in THREAD_VARS}
    os.environ.update(thread_env(threads))
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
