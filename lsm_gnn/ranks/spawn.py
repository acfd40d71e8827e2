"""Start G ranks on this machine and watch them: the parent's side, and each rank's entry point.

`run_ranks(cfg, worker, worker_args)` spawns `cfg.distributed.devices` processes
(torch.multiprocessing, spawn); each joins the process group on `127.0.0.1` (group.py), runs
the worker (workers.py) and leaves `rank-R.json` (its result) or `rank-R.error.json`.

Faults: a rank ends when the parent does, killed or not (health.die_with_parent). The parent
polls the ranks. A rank that exits with an error, is killed, or stops
stamping its heartbeat for `distributed.timeout_s` while the others wait for it, is the failed
rank; the parent terminates the others at once and reports it (`failure.rank`). Inside the
ranks, the process-group timeout bounds every collective, so no rank blocks forever even
without the parent (the `torchrun` case, see launch.torchrun_main and docs/multi-device.md).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

from lsm_gnn.config import RunConfig, config_to_dict, parse_config
from lsm_gnn.multidevice.group import init_process_group, pick_free_port
from lsm_gnn.multidevice.health import DONE, IN_COLLECTIVE, STARTING, STARTUP_LIMIT_S, WORKING, Heartbeat, \
    die_with_parent
from lsm_gnn.ranks.workers import resolve_worker
from lsm_gnn.utils.atomic import write_json
from lsm_gnn.utils.errors import DistributedError
from lsm_gnn.utils.threads import pinned_thread_env

POLL_S = 0.2
TERMINATE_GRACE_S = 5.0
PAUSE_GAP_S = 5.0  # a watchdog poll this late (25 polls) means the launcher was stopped, not slow


# ---- inside a rank ---------------------------------------------------------------------------------
def rank_main(rank, world_size, cfg_dict, worker, worker_args, init_method, stamps, phases, outdir,
              parent_pid=None):
    """Entry point of a spawned rank: join the group, run the worker, leave a result or an error file.
    The rank ends when its launcher (`parent_pid`) does (health.die_with_parent)."""
    die_with_parent(parent_pid)
    os.environ.setdefault("DGLBACKEND", "pytorch")
    hb = Heartbeat(rank, stamps, phases)
    hb.beat(STARTING)
    out = Path(outdir)
    try:
        import torch
        import torch.distributed as dist

        cfg = parse_config(cfg_dict)
        torch.set_num_threads(rank_threads(cfg, world_size))
        init_process_group(cfg.distributed, cfg.train.device, rank, world_size, init_method)
        hb.beat(STARTING)
        result = resolve_worker(worker)(cfg, rank, world_size, hb, worker_args)
        hb.beat(IN_COLLECTIVE)
        dist.barrier()  # nobody leaves while a peer still needs it for a collective
        write_json(out / f"rank-{rank}.json", result)
        hb.beat(DONE)
        dist.destroy_process_group()
    except BaseException as e:  # noqa: BLE001 - every failure must leave an error file
        peer = isinstance(e, DistributedError) and e.rank is None or "Connection" in str(e) \
            or "Timeout" in type(e).__name__ or "timed out" in str(e).lower()
        write_json(out / f"rank-{rank}.error.json",
                   {"rank": rank, "kind": "peer" if peer else "own", "type": type(e).__name__,
                    "message": str(e).splitlines()[0] if str(e) else type(e).__name__,
                    "traceback": traceback.format_exc()})
        sys.stderr.flush()
        os._exit(1)  # skip atexit/destructors that could wait on dead peers


def rank_threads(cfg: RunConfig, world_size: int) -> int:
    """Threads of one rank: train.threads, else the cores shared evenly among the ranks."""
    return cfg.train.threads or max(1, (os.cpu_count() or 1) // world_size)


# ---- the parent ------------------------------------------------------------------------------------
def run_ranks(cfg: RunConfig, worker: str, worker_args: dict) -> tuple[list[dict] | None, dict | None, float]:
    """Spawn the ranks, watch them to the end: (every rank's result, None, wall seconds) or
    (None, the failure naming the failed rank, wall seconds)."""
    import torch.multiprocessing as mp

    G = cfg.distributed.devices
    addr = cfg.distributed.master_addr
    port = cfg.distributed.master_port or pick_free_port(addr)
    init_method = f"tcp://{addr}:{port}"
    ctx = mp.get_context("spawn")
    stamps = ctx.Array("d", [time.monotonic()] * G, lock=False)
    phases = ctx.Array("i", [STARTING] * G, lock=False)
    outdir = Path(tempfile.mkdtemp(prefix="lsm-gnn-ranks-"))
    procs = []
    t_start = time.perf_counter()
    # an emulated storage device whose SSDs all devices share keeps one clock for every rank: its
    # folder is named in the ranks' environment and lives until they end
    clock = contextlib.ExitStack()
    if cfg.storage.device == "emulated":
        from lsm_gnn.storage.emulated import device_clock_env

        clock.enter_context(device_clock_env())
    try:
        # the native libraries' thread counts as torch's in the rank, whatever the caller set
        with pinned_thread_env(rank_threads(cfg, G)):
            for r in range(G):
                p = ctx.Process(target=rank_main, name=f"lsm-gnn-rank-{r}",
                                args=(r, G, config_to_dict(cfg), worker, worker_args, init_method,
                                      stamps, phases, str(outdir), os.getpid()))
                p.start()
                procs.append(p)
        failure = _watch(procs, stamps, phases, outdir, cfg.distributed.timeout_s)
        wall = time.perf_counter() - t_start
        results = None
        if failure is None:
            results = [json.loads((outdir / f"rank-{r}.json").read_text()) for r in range(G)]
        return results, failure, wall
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
            p.join(timeout=1)
        shutil.rmtree(outdir, ignore_errors=True)
        clock.close()


def _read_error(outdir: Path, r: int) -> dict | None:
    p = outdir / f"rank-{r}.error.json"
    try:
        return json.loads(p.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def _stopped(pid: int | None) -> bool:
    """Whether process `pid` is stopped now (SIGSTOP, SIGTSTP, a debugger): state T or t in /proc."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        return data[data.rindex(b")") + 2:][:1] in (b"T", b"t")
    except (OSError, ValueError):
        return False


def _watch(procs, stamps, phases, outdir: Path, timeout: float) -> dict | None:
    """Poll until every rank is done (None) or one failed (a failure dict naming the rank).

    A rank's silence is counted from its last heartbeat or the last time it was seen stopped,
    whichever is later: a rank paused (SIGSTOP) and resumed (SIGCONT) is not a hung rank, and it
    gets the whole timeout after it resumes. A gap in this loop itself (the launcher was stopped
    with its ranks, as Ctrl-Z does) excuses every rank the same way."""
    excused = [0.0] * len(procs)
    stopped_since: list[float | None] = [None] * len(procs)
    last = time.monotonic()
    while True:
        codes = [p.exitcode for p in procs]
        if all(c == 0 for c in codes):
            return None
        now = time.monotonic()
        if now - last > PAUSE_GAP_S:  # this loop was not scheduled: the launcher itself was stopped
            excused = [now] * len(procs)
        last = now
        for r, p in enumerate(procs):
            if codes[r] is None and _stopped(p.pid):
                stopped_since[r] = stopped_since[r] or now
                excused[r] = now
            else:
                stopped_since[r] = None
        # stopped for longer than the timeout: no longer a pause, the rank is what the others wait for
        held = [r for r, t in enumerate(stopped_since) if t is not None and now - t > timeout]
        dead = [r for r, c in enumerate(codes) if c not in (None, 0)]
        alive = [r for r, c in enumerate(codes) if c is None and phases[r] != DONE]
        stale = [r for r in alive
                 if r in held or now - max(stamps[r], excused[r]) >
                 (max(timeout, STARTUP_LIMIT_S) if phases[r] == STARTING else timeout)]
        # a slow rank is only a hung rank when another one is blocked waiting for it (or all are
        # stuck): ranks that are all busy (JIT compiles, evaluation) are not a failure
        waiting = [r for r in stale if phases[r] == IN_COLLECTIVE and r not in held]
        hung = [r for r in stale if phases[r] != IN_COLLECTIVE or r in held]
        if dead or (hung and waiting) or (alive and len(stale) == len(alive)) or (held and len(held) < len(alive)):
            time.sleep(POLL_S)  # let simultaneous error files land before judging
            failure = _judge(procs, stamps, phases, outdir, dead, stale, timeout,
                             {r: now - stopped_since[r] for r in held})
            _terminate(procs)
            for state, p in zip(failure["ranks"], procs):
                state["exitcode"] = p.exitcode
            return failure
        time.sleep(POLL_S)


def _judge(procs, stamps, phases, outdir, dead, stale, timeout, held: dict | None = None) -> dict:
    errors = {r: _read_error(outdir, r) for r in range(len(procs))}
    codes = [p.exitcode for p in procs]
    if held:  # 0. a rank stopped (SIGSTOP, a debugger) for longer than the timeout
        r = min(held)
        return {"rank": r, "message": f"stopped (SIGSTOP or a debugger) for {held[r]:.0f} s, longer than "
                                      f"distributed.timeout_s={timeout:g}; the other ranks were waiting for it",
                "ranks": _states(procs, errors)}
    # 1. a rank that died by itself (killed, crashed, or an error of its own)
    own = [r for r in dead if errors[r] is None or errors[r]["kind"] == "own"]
    for r in own:
        e = errors[r]
        if e is None:
            how = f"exit code {codes[r]}" + (f" (signal {-codes[r]})" if codes[r] < 0 else "")
            return {"rank": r, "message": f"process exited unexpectedly with {how}", "ranks": _states(procs, errors)}
        return {"rank": r, "message": f"{e['type']}: {e['message']}", "ranks": _states(procs, errors)}
    # 2. a rank that stopped answering while not waiting for the others
    suspects = [r for r in range(len(procs)) if codes[r] is None and phases[r] == WORKING] or \
               [r for r in range(len(procs)) if codes[r] is None and phases[r] != DONE]
    if suspects:
        r = min(suspects, key=lambda q: stamps[q])
        idle = time.monotonic() - stamps[r]
        return {"rank": r, "message": f"no progress for {idle:.0f} s (distributed.timeout_s={timeout:g}); "
                                      "the other ranks were waiting for it", "ranks": _states(procs, errors)}
    r = dead[0] if dead else None
    msg = errors[r]["message"] if r is not None and errors[r] else "a rank failed"
    return {"rank": r, "message": msg, "ranks": _states(procs, errors)}


def _states(procs, errors) -> list[dict]:
    return [{"rank": r, "exitcode": p.exitcode, "error": (errors[r] or {}).get("message")}
            for r, p in enumerate(procs)]


def _terminate(procs) -> None:
    for p in procs:
        if p.is_alive():
            p.terminate()
    deadline = time.monotonic() + TERMINATE_GRACE_S
    for p in procs:
        p.join(timeout=max(0.0, deadline - time.monotonic()))
        if p.is_alive():
            p.kill()
            p.join(timeout=1)
