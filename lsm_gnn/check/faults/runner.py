"""The runner of `lsm-gnn check faults`: every selected case in a forked child with its time limit."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import tempfile
import time
import traceback
from pathlib import Path

from lsm_gnn.check.faults.base import BASE_DIM, BASE_NODES, CASES, Case, Ctx, GOOD, OUTCOMES, _first_line


def select(cheap_only: bool = False, names: list[str] | None = None) -> list[Case]:
    out = [c for c in CASES if (c.cheap or not cheap_only) and (not names or any(n in c.name for n in names))]
    return out


def make_base(root: Path) -> Path:
    """The pristine tiny graph, generated in a child process (the parent stays fork-safe)."""
    base = root / "base"
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            from lsm_gnn.datasets.synthetic import generate

            generate(base, BASE_NODES, feature_dim=BASE_DIM, progress=False)
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"could not generate the tiny graph under {root}")
    return base


def run_case(c: Case, root: Path, base: Path, command) -> dict:
    """Run one case in a forked child (own process group) with its time limit."""
    tmp = Path(tempfile.mkdtemp(prefix=f"{c.name}-", dir=root))
    r, w = os.pipe()
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the case
        os.close(r)
        code = 0
        try:
            os.setpgid(0, 0)
            log = os.open(tmp / "case.log", os.O_WRONLY | os.O_CREAT, 0o644)
            os.dup2(log, 1)
            os.dup2(log, 2)
            os.chdir(tmp)
            ctx = Ctx(tmp, base, command)
            try:
                res = c.run(ctx)
                out = {"outcome": res.outcome, "detail": res.detail, "notes": ctx.notes}
            except Exception as e:  # noqa: BLE001 - the case's own bug counts as a traceback
                out = {"outcome": "traceback", "detail": f"in the case: {type(e).__name__}: {_first_line(e)}",
                       "notes": ctx.notes}
                traceback.print_exc()
            os.write(w, json.dumps(out).encode())
        except BaseException:  # noqa: BLE001
            code = 1
        finally:
            os._exit(code)
    os.close(w)
    chunks, deadline = [], t0 + c.timeout_s
    import select as sel

    done = False
    while time.monotonic() < deadline:
        ready, _, _ = sel.select([r], [], [], max(0.0, min(1.0, deadline - time.monotonic())))
        if ready:
            chunk = os.read(r, 65536)
            if not chunk:
                done = True
                break
            chunks.append(chunk)
    os.close(r)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)  # whatever the case left running
    _, status = os.waitpid(pid, 0)
    secs = time.monotonic() - t0
    if not done:
        res = {"outcome": "hang", "detail": f"no end within {c.timeout_s:g} s", "notes": []}
    elif not chunks:
        code = os.waitstatus_to_exitcode(status)
        how = f"signal {-code} ({signal.Signals(-code).name})" if code < 0 else f"exit status {code}"
        res = {"outcome": "traceback", "detail": f"the command crashed: {how}", "notes": []}
    else:
        res = json.loads(b"".join(chunks))
    res.update({"name": c.name, "what": c.what, "seconds": round(secs, 2), "cheap": c.cheap})
    _cleanup(tmp)
    return res


def _cleanup(tmp: Path) -> None:
    for p in tmp.rglob("*"):
        with contextlib.suppress(OSError):
            if p.is_dir():
                os.chmod(p, 0o755)
    shutil.rmtree(tmp, ignore_errors=True)


def run_suite(cases: list[Case], *, command, workdir: str | os.PathLike | None = None, say=print) -> dict:
    """Run `cases` through `command` (the `lsm-gnn` click group, lsm_gnn.cli.cli) and return
    {"cases": [...], "totals": {outcome: n}, "seconds": s}."""
    for name in ("dataset", "simulate", "train"):  # the slow imports, paid once before forking
        command.get_command(None, name)
    import lsm_gnn.datasets.importer, lsm_gnn.datasets.pagerank, lsm_gnn.sim.simulate  # noqa: F401, E401
    from lsm_gnn.train.loop import import_optimizer
    from lsm_gnn.config import parse_config

    import_optimizer(parse_config({}))  # 15 s of every training case here, paid once

    os.environ.setdefault("DGLBACKEND", "pytorch")
    t0 = time.monotonic()
    if workdir is not None:  # a --workdir not there yet is made (it was a FileNotFoundError traceback)
        Path(workdir).mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="lsm-gnn-faults-", dir=workdir)).resolve()
    results = []
    try:
        base = make_base(root)
        width = max(len(c.name) for c in cases)
        for i, c in enumerate(cases, 1):
            res = run_case(c, root, base, command)
            results.append(res)
            flag = "" if res["outcome"] in GOOD else "  <-- BAD"
            say(f"[{i:2d}/{len(cases)}] {c.name:<{width}}  {res['outcome']:<14} {res['seconds']:6.1f} s  "
                f"{c.what}")
            say(f"{'':>{width + 8}}  -> {res['detail'][:400]}" + (f" ({'; '.join(res['notes'])})" if res["notes"]
                                                                  else "") + flag)
    finally:
        _cleanup(root)
    totals = {o: sum(r["outcome"] == o for r in results) for o in OUTCOMES}
    secs = time.monotonic() - t0
    say(f"{len(results)} cases in {secs:.0f} s: " + ", ".join(f"{o} {n}" for o, n in totals.items()))
    return {"cases": results, "totals": totals, "seconds": secs, "ok": all(r["outcome"] in GOOD for r in results)}
