"""Liveness of the ranks of a multi-device run: heartbeats, and fault injection for tests.

Each rank stamps a shared slot when it makes progress and says whether it is waiting inside a
collective of ours. The launcher's watchdog reads the slots: a rank that stopped stamping while
*not* waiting for the others is the one that hangs; the ranks blocked in a collective are its
victims, not the cause. Under `torchrun` (no launcher parent) the heartbeat is a no-op and the
process-group timeout plus torchrun's own agent end the run.

A rank dies with its launcher (`die_with_parent`): the kernel sends it SIGKILL when the process
that started it exits (prctl PR_SET_PDEATHSIG), however the launcher ended; without prctl a
watchdog thread polls the parent pid. Without it a SIGKILL of `lsm-gnn train --devices 2` left
both ranks training, reparented to init, until someone killed them.

Fault injection (`LSM_GNN_FAULT`, documented in docs/multi-device.md) lets the tests and a user
check the failure path: `rank=1,iter=3,kind=kill|hang|raise`.
"""

from __future__ import annotations

import ctypes
import os
import signal
import threading
import time

from lsm_gnn.utils.errors import DistributedError, InputError

WORKING, IN_COLLECTIVE, DONE, STARTING = 0, 1, 2, 3
STARTUP_LIMIT_S = 300.0  # imports, process group, owner files, JIT compiles: before the first beat
FAULT_ENV = "LSM_GNN_FAULT"


PR_SET_PDEATHSIG = 1  # linux/prctl.h
PARENT_POLL_S = 1.0


def die_with_parent(parent_pid: int | None) -> str:
    """Make this process end when `parent_pid` (the launcher) does: prctl(PR_SET_PDEATHSIG, SIGKILL),
    else a thread that polls the parent. If the launcher is already gone, exit now. Returns the
    mechanism ("prctl", "watchdog" or "none" without a parent pid)."""
    if parent_pid is None:
        return "none"
    how = "watchdog"
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0:
            how = "prctl"
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent_pid:  # the launcher died before the death signal was armed
        os._exit(1)
    if how == "watchdog":
        def watch():
            while os.getppid() == parent_pid:
                time.sleep(PARENT_POLL_S)
            os._exit(1)

        threading.Thread(target=watch, name="lsm-gnn-parent-watchdog", daemon=True).start()
    return how


class Heartbeat:
    """One rank's view of the shared heartbeat arrays (or a no-op when `stamps` is None)."""

    def __init__(self, rank: int, stamps=None, phases=None):
        self.rank, self.stamps, self.phases = rank, stamps, phases

    def beat(self, phase: int = WORKING) -> None:
        if self.stamps is not None:
            self.stamps[self.rank] = time.monotonic()
            self.phases[self.rank] = phase

    def collective(self):
        return _InCollective(self)


class _InCollective:
    def __init__(self, hb: Heartbeat):
        self.hb = hb

    def __enter__(self):
        self.hb.beat(IN_COLLECTIVE)

    def __exit__(self, *exc):
        self.hb.beat(WORKING)


NULL_HEARTBEAT = Heartbeat(0)


def parse_fault(spec: str | None) -> dict | None:
    """`rank=1,iter=3,kind=kill` -> {"rank": 1, "iter": 3, "kind": "kill"}; None when unset."""
    if not spec:
        return None
    out: dict = {}
    for part in spec.split(","):
        if "=" not in part:
            raise InputError(f"{FAULT_ENV}: expected key=value pairs, found {part!r}")
        k, v = (s.strip() for s in part.split("=", 1))
        out[k] = v
    try:
        fault = {"rank": int(out["rank"]), "iter": int(out.get("iter", 0)), "kind": out.get("kind", "kill")}
    except (KeyError, ValueError):
        raise InputError(f"{FAULT_ENV}: expected rank=R[,iter=I][,kind=kill|hang|raise], found {spec!r}") from None
    if fault["kind"] not in ("kill", "hang", "raise"):
        raise InputError(f"{FAULT_ENV}: kind must be kill, hang or raise, found {fault['kind']!r}")
    return fault


class FaultInjector:
    """Fires the configured fault on the configured rank at the configured fetch."""

    def __init__(self, rank: int, spec: str | None = None):
        self.fault = parse_fault(spec if spec is not None else os.environ.get(FAULT_ENV))
        self.rank = rank
        self.calls = 0

    def tick(self) -> None:
        f = self.fault
        if f is not None and f["rank"] == self.rank and self.calls == f["iter"]:
            if f["kind"] == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            elif f["kind"] == "hang":
                while True:  # a rank that stops answering; only a signal ends it
                    time.sleep(3600)
            else:
                raise DistributedError(self.rank, f"injected fault at fetch {self.calls} ({FAULT_ENV})")
        self.calls += 1
