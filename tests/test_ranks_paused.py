"""A rank paused (SIGSTOP) and resumed (SIGCONT) within distributed.timeout_s is not a failure: the
launcher's watchdog (lsm_gnn.ranks.spawn._watch) counts a rank's silence from its last heartbeat
or the last time it saw it stopped; a rank stopped for longer than the timeout is the failed one,
named as stopped. A failure before the ranks start writes a failed record."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import signal
import time

import pytest

from lsm_gnn.multidevice.health import DONE, IN_COLLECTIVE, WORKING
from lsm_gnn.ranks.spawn import _watch

TIMEOUT = 2.5


def _rank(r, stamps, phases, silent_s, steps):
    """Rank 1 works `silent_s` between heartbeats; rank 0 waits in a collective for it, beating
    only when rank 1 does (the collective completes), as a rank blocked in gloo does."""
    if r == 0:
        seen = stamps[1]
        stamps[0], phases[0] = time.monotonic(), IN_COLLECTIVE
        while phases[1] != DONE:
            if stamps[1] != seen:
                seen, stamps[0] = stamps[1], time.monotonic()
            time.sleep(0.02)
    else:
        for _ in range(steps):
            stamps[1], phases[1] = time.monotonic(), WORKING
            time.sleep(silent_s)
        stamps[1] = time.monotonic()
    phases[r] = DONE


def _start(steps0, steps1, silent_s):
    ctx = mp.get_context("fork")
    stamps = ctx.Array("d", [time.monotonic()] * 2, lock=False)
    phases = ctx.Array("i", [WORKING] * 2, lock=False)
    procs = [ctx.Process(target=_rank, args=(0, stamps, phases, silent_s, steps0)),
             ctx.Process(target=_rank, args=(1, stamps, phases, silent_s, steps1))]
    for p in procs:
        p.start()
    return procs, stamps, phases


def _pause_later(pid: int, after_s: float, for_s: float | None) -> int:
    child = os.fork()
    if child == 0:
        try:
            time.sleep(after_s)
            os.kill(pid, signal.SIGSTOP)
            if for_s is not None:
                time.sleep(for_s)
                os.kill(pid, signal.SIGCONT)
        finally:
            os._exit(0)
    return child


def test_a_rank_paused_and_resumed_within_the_timeout_is_not_a_failure(tmp_path):
    # rank 1 is silent 2 s between beats; stopped 1 s into that for 2 s (< the 2.5 s timeout), it has
    # been silent 3 s when it resumes: counted from its last beat, that read as a hung rank
    procs, stamps, phases = _start(steps0=0, steps1=3, silent_s=2.0)
    pauser = _pause_later(procs[1].pid, 1.0, 2.0)
    try:
        failure = _watch(procs, stamps, phases, tmp_path, TIMEOUT)
    finally:
        os.waitpid(pauser, 0)
        for p in procs:
            p.kill()
            p.join()
    assert failure is None


def test_a_rank_stopped_longer_than_the_timeout_is_the_failed_one_named_as_stopped(tmp_path):
    procs, stamps, phases = _start(steps0=0, steps1=10_000, silent_s=0.05)
    pauser = _pause_later(procs[1].pid, 0.3, None)
    try:
        failure = _watch(procs, stamps, phases, tmp_path, TIMEOUT)
    finally:
        os.waitpid(pauser, 0)
        for p in procs:
            os.kill(p.pid, signal.SIGCONT) if p.is_alive() else None
            p.kill()
            p.join()
    assert failure is not None and failure["rank"] == 1 and "stopped" in failure["message"]
    assert "distributed.timeout_s=2.5" in failure["message"]


def test_a_failure_before_the_ranks_start_writes_a_failed_record(tmp_path, monkeypatch):
    from lsm_gnn.config import load_config
    from lsm_gnn.ranks import launch

    def no_spawn(*a, **k):
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(launch, "run_ranks", no_spawn)
    cfg = load_config(None, ["distributed.devices=2", "distributed.mode=isolated", f"dataset.path={tmp_path}"])
    rec = tmp_path / "run.json"
    with pytest.raises(OSError):
        launch.run_multi_device(cfg, record_path=rec)
    out = json.loads(rec.read_text())
    assert out["status"] == "failed" and "Too many open files" in out["failure"]["message"]
