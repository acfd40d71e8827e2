"""One writer per output: a run record or a dataset directory is written by one process at a time.

`exclusive(path)` takes a non-blocking flock(2) on the lock file beside the output,
`.NAME.lock` in the output's own folder (its folder's symlinks resolved): every writer of one
output finds the same lock whatever its temporary folder or environment, so a second one gets a
`BusyError` naming the path at once instead of both writing and one result being lost (a lock in a
temporary folder let two runs from different $TMPDIRs write one record). The kernel drops a lock
when its holder exits, killed or not: a stale lock file is never an obstacle. The holder removes
the lock file when it is done; a writer that took a lock on a file already removed (the inode at
the path is no longer the one it locked) tries again, so removing never lets two writers in. Locks
hold between processes of one machine (not across NFS clients). Within one process the lock is
re-entrant (a run that claims its record and a launcher above it that claims the same one).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from pathlib import Path
from typing import Iterator

from lsm_gnn.utils.errors import BusyError, OutputError

_held: dict[tuple[int, str], int] = {}  # (pid, lock file) -> depth: re-entrant in this process only


def lock_file(path: str | os.PathLike) -> Path:
    """The lock file of `path`: `.NAME.lock` beside it (the folder symlink-resolved, the name not)."""
    p = Path(os.path.abspath(os.fspath(path)))
    return Path(os.path.realpath(p.parent)) / f".{p.name}.lock"


def is_locked(path: str | os.PathLike) -> bool:
    """Whether some process holds the lock of `path` now (a probe: takes nothing, creates nothing)."""
    try:
        fd = os.open(lock_file(path), os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def _acquire(lf: Path, path, what: str) -> int:
    while True:
        try:
            fd = os.open(lf, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as e:
            raise OutputError.from_os_error(lf, e, f"cannot take the lock of {os.fspath(path)}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise BusyError(path, f"another process is writing this {what} (lock {lf}); wait for it to "
                                      "finish or write elsewhere") from None
            raise OutputError.from_os_error(lf, e, f"cannot take the lock of {os.fspath(path)}") from None
        try:
            same = os.stat(lf).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)  # the holder before us removed the file we locked: lock the one there now


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
    fd = _acquire(lf, path, what)
    _held[key] = 1
    try:
        yield lf
    finally:
        del _held[key]
        with contextlib.suppress(OSError):
            os.unlink(lf)  # still holding it: whoever opens the old file next sees it gone and retries
        os.close(fd)
