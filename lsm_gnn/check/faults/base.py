"""What every fault case sees: how a command ended (`Ran`), its verdict (`Outcome`), the case's
folder and commands (`Ctx`), the helpers that damage a dataset, and the `CASES` table (`case`)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

OUTCOMES = ("clear error", "failed record", "recovered", "silently wrong", "hang", "traceback")
GOOD = ("clear error", "failed record", "recovered")
BASE_NODES, BASE_DIM = 2000, 16
ETYPE = "paper__cites__paper"


# ---- what a case sees ------------------------------------------------------------------------------
@dataclass
class Ran:
    """How one command ended: `error` is None when it succeeded."""
    error: BaseException | None = None
    kind: str = "ok"            # ok | clear | traceback | exit
    code: int = 0
    output: str = ""


class Ctx:
    """A case's temporary folder, the pristine tiny graph and the ways to run `lsm-gnn` in it."""

    def __init__(self, tmp: Path, base: Path, command):
        # `command`: the `lsm-gnn` group the suite was started from (lsm_gnn.cli.cli), handed down
        # so that this room, which the CLI's table names, imports no CLI back
        self.tmp, self.base, self.command = tmp, base, command
        self.notes: list[str] = []
        self.before: dict = {}  # what a case's folder held before the command (the outputs cases)

    def dataset(self, name: str = "ds") -> Path:
        """A fresh copy of the tiny graph to damage."""
        dst = self.tmp / name
        shutil.copytree(self.base, dst)
        return dst

    def note(self, text: str) -> None:
        self.notes.append(text)

    def cli(self, *args: str) -> Ran:
        """`lsm-gnn ARGS` in this process, with the console script's error handling
        (lsm_gnn.cli.main, reported_error): what it reports as `error: ...` or a usage error is a
        clear error, anything else a traceback."""
        import click

        from lsm_gnn.utils.errors import reported_error

        cli = self.command

        out = io.StringIO()
        ran = Ran()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            try:
                cli.main([str(a) for a in args], prog_name="lsm-gnn", standalone_mode=False)
            except click.exceptions.ClickException as e:
                ran.error, ran.kind, ran.code = e, "clear", e.exit_code
                print(f"Error: {e.format_message()}")  # what the console prints: the option's name included
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
                if code:
                    ran.error, ran.kind, ran.code = e, "exit", code
            except Exception as e:  # noqa: BLE001 - what the suite is here to count
                if reported_error(e) is not None:
                    ran.error, ran.kind, ran.code = e, "clear", 2
                else:
                    ran.error, ran.kind, ran.code = e, "traceback", 1
                    traceback.print_exc(file=out)
        ran.output = out.getvalue()
        return ran

    def train(self, ds: Path, record: Path | None = None, *extra: str) -> Ran:
        """One tiny epoch of `lsm-gnn train` (LSM-GNN's cache over O_DIRECT reads) on `ds`."""
        args = ["train", "--config", "lsm", "--dataset", ds, "--epochs", "1", "--batch-size", "256",
                "--fanouts", "4,4", "--threads", "1", "--quiet", "--set", "model.hidden=16"]
        args += ["--record", record or self.tmp / "run.json"]
        return self.cli(*args, *extra)


@dataclass
class Outcome:
    outcome: str
    detail: str


def judge_error(ran: Ran, record: Path | None = None, *, names: str | None = None) -> Outcome:
    """The outcome of a command that should have refused the fault: a clear error (a failed record
    if `record` says so), a traceback, or silently wrong when it succeeded."""
    if ran.error is None:
        return Outcome("silently wrong", "the command succeeded")
    lines = ran.output.strip().splitlines()
    msg = _first_line(ran.error) or (lines[-1][:300] if lines else "")
    if ran.kind == "traceback":
        return Outcome("traceback", f"{type(ran.error).__name__}: {msg}")
    detail = f"{type(ran.error).__name__}: {msg}"
    if names is not None and names not in str(ran.error) + ran.output:
        detail += f" [does not name {names}]"
    if record is not None and record.exists():
        try:
            rec = json.loads(record.read_text())
        except (OSError, json.JSONDecodeError):
            return Outcome("silently wrong", f"{detail}; the record {record.name} is not JSON")
        if rec.get("status") == "failed":
            return Outcome("failed record", detail)
        return Outcome("silently wrong", f"{detail}; yet the record says {rec.get('status')}")
    return Outcome("clear error", detail)


def judge_run(ran: Ran, ok: Callable[[], str | None]) -> Outcome:
    """The outcome of a command that may go on: `ok()` returns how it recovered (None: it did not)."""
    if ran.error is not None:
        return judge_error(ran)
    how = ok()
    return Outcome("recovered", how) if how else Outcome("silently wrong", "succeeded without saying anything")


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0][:300] if text else ""


def _record_status(path: Path) -> str | None:
    try:
        return json.loads(path.read_text()).get("status")
    except (OSError, json.JSONDecodeError):
        return None


# ---- damage helpers --------------------------------------------------------------------------------
def _npy(ds: Path, rel: str):
    import numpy as np

    return np.load(ds / rel)


def _save_npy(ds: Path, rel: str, arr) -> None:
    import numpy as np

    with open(ds / rel, "wb") as f:
        np.save(f, arr)


def _meta(ds: Path) -> dict:
    return json.loads((ds / "metadata.json").read_text())


def _set_meta(ds: Path, meta: dict) -> None:
    (ds / "metadata.json").write_text(json.dumps(meta, indent=2))


def _flip_byte(path: Path, offset: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0x40]))


def _hub(ds: Path) -> int:
    import numpy as np

    indptr = _npy(ds, f"topology/{ETYPE}/csr_indptr.npy")
    return int(np.argmax(np.diff(indptr)))


def _write_row(ds: Path, row: int, value: float) -> None:
    import numpy as np

    m = _meta(ds)["features"]
    with open(ds / "features.bin", "r+b") as f:
        f.seek(row * m["row_stride"])
        f.write(np.full(m["dim"], value, dtype=m["dtype"]).tobytes())


def _spawn_cli(args: list, **kw) -> subprocess.Popen:
    """`python -m lsm_gnn.cli ARGS` as a real process (for what must be killed from outside)."""
    env = dict(os.environ, DGLBACKEND="pytorch")
    return subprocess.Popen([sys.executable, "-m", "lsm_gnn.cli", *map(str, args)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)


def _wait_for(pred: Callable[[], bool], timeout: float, poll: float = 0.1) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(poll)
    return pred()


def _lock_held(path: Path) -> bool:
    from lsm_gnn.utils.locks import is_locked

    return is_locked(path)


# ---- the cases -------------------------------------------------------------------------------------
@dataclass
class Case:
    name: str
    what: str
    run: Callable[[Ctx], Outcome]
    cheap: bool = True
    timeout_s: float = 60.0


CASES: list[Case] = []


def case(name: str, what: str, *, cheap: bool = True, timeout_s: float = 60.0):
    def deco(fn):
        CASES.append(Case(name, what, fn, cheap, timeout_s))
        return fn
    return deco
