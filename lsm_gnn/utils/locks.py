"""One writer per output: a run record or a dataset directory is written by one process at a time.

`exclusive(path)` takes a non-blocking lock (filelock: flock(2) on Linux) for `path`; a second
process that asks for the same path gets a `BusyError` naming it at once instead of both writing
and one result being lost. The lock files live in one folder outside the outputs
(`$LSM_GNN_LOCK_DIR`, default `<tmp>/lsm-gnn-locks`), named by a hash of the absolute path, so a
record's folder or a dataset's parent holds nothing but outputs. The kernel drops a lock when its
holder exits, killed or not: a stale lock file is never an obstacle. Within one process the lock
is re-entrant (a run that claims its record and a launcher above it that claims the same one).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from pathlib import Path
from typing import Iterator

from filelock import FileLock, Timeout

from lsm_gnn.utils.errors import BusyError, OutputError

LOCK_DIR_ENV = "LSM_GNN_LOCK_DIR"
_held: dict[tuple[int, str], int] = {}  # (pid, lock file) -> depth: re-entrant in this process only


def lock_dir() -> Path:
    return Path(os.environ.get(LOCK_DIR_ENV) or Path(tempfile.gettempdir()) / "lsm-gnn-locks")


def lock_file(path: str | os.PathLike) -> Path:
    """The lock file of `path` (its absolute, symlink-resolved form)."""
    key = os.path.realpath(os.fspath(path))
    digest = hashlib.sha256(key.encode()).hexdigest()[:24]
    return lock_dir() / f"{Path(key).name[:40]}.{digest}.lock"


@contextlib.contextmanager
def exclusive(path: str | os.PathLike, what: str = "output") -> Iterator[Path]:
    """Hold the lock of `path` for the block; `BusyError` if another process holds it."""
    lf = lock_file(path)
    key = (os.getpid(), os.fspath(lf))
    if key in _held:
        _held[key] += 1
        try:
            yield lf
        finally:
            _held[key] -= 1
        return
    try:
        lf.parent.mkdir(parents=True, exist_ok=True)
        lock = FileLock(lf, timeout=0)
        lock.acquire()
    except Timeout:
        raise BusyError(path, f"another process is writing this {what} (lock {lf}); wait for it to finish "
                              "or write elsewhere") from None
    except OSError as e:
        raise OutputError.from_os_error(lf, e, f"cannot take the lock of {os.fspath(path)}") from None
    _held[key] = 1
    try:
        yield lf
    finally:
        del _held[key]
        lock.release()
