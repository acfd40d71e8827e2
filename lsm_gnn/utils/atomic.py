"""Atomic outputs: an interrupted step leaves nothing that looks complete.

Files are written to a temporary sibling and renamed into place; directories are built under a
temporary sibling name and renamed when complete. A file system that refuses the write (full,
read-only, no permission) is an `OutputError` naming the output, never a bare OSError; the
temporary sibling is removed. A directory is built under its writer lock (lsm_gnn.utils.locks),
and the builder first removes the temporary siblings a killed builder left (`remove_leftovers`),
saying what it removed; a workflow run removes those of every file under its output folders when it
starts (`sweep_leftovers`).
"""

from __future__ import annotations

import contextlib
import errno
import glob
import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Iterator

from lsm_gnn.utils.errors import OutputError, is_environment_error
from lsm_gnn.utils.outpaths import check_output

# errors of a write in progress that are the file system's, not the caller's
WRITE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS)


@contextlib.contextmanager
def refused(path: str | os.PathLike, doing: str = "cannot write", errnos: tuple[int, ...] | None = None):
    """Inside the block, an OSError of the file system (`is_environment_error`; with `errnos`, only
    those) becomes an `OutputError` naming `path` and what was being done; other errors pass."""
    try:
        yield
    except OSError as e:
        if e.errno in errnos if errnos is not None else is_environment_error(e):
            raise OutputError.from_os_error(Path(path), e, doing) from None
        raise


def make_parent(path: str | os.PathLike) -> Path:
    """Create `path`'s folder (and above); an OutputError naming it when that is refused."""
    parent = Path(path).parent
    try:
        with refused(parent, "cannot create the output folder"):
            parent.mkdir(parents=True, exist_ok=True)
    except FileExistsError as e:
        raise OutputError(parent, "cannot create the output folder: a file of that name is in the way") from e
    return parent


# the name every temporary sibling of NAME gets here (`atomic_path`, `temp_dir`, the record's probe;
# tempfile's 8 random characters): .NAME.XXXXXXXX[.probe].partial[SUFFIX]
_LEFTOVER = re.compile(r"^\.(?P<name>.+)\.[a-z0-9_]{8}(?:\.probe)?\.partial")


# the lock file of NAME (lsm_gnn.utils.locks): its holder removes it; one killed leaves it
_LOCK = re.compile(r"^\.(?P<name>.+)\.lock$")


def is_leftover(name: str) -> bool:
    """Whether a file or folder of this name is an atomic writer's temporary sibling or a writer's
    lock file (which only a killed writer leaves behind)."""
    return bool(_LEFTOVER.match(name) or _LOCK.match(name))


def leftovers(path: str | os.PathLike) -> list[Path]:
    """Temporary siblings of `path` left by a writer that was killed."""
    path = Path(path)
    if not path.parent.is_dir():
        return []
    return sorted(p for p in path.parent.glob(f".{glob.escape(path.name)}.*")
                  if (m := _LEFTOVER.match(p.name)) and m["name"] == path.name)


def _size(p: Path) -> int:
    if p.is_file():
        return p.stat().st_size
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


def _remove(p: Path, of: Path, say) -> Path:
    size = _size(p)
    if p.is_dir() and not p.is_symlink():
        shutil.rmtree(p, ignore_errors=True)
    else:
        p.unlink(missing_ok=True)
    say(f"removed {p} ({size / 2**20:.1f} MiB), left by an interrupted writer of {of}")
    return p


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr)


def remove_leftovers(path: str | os.PathLike, *, say=None) -> list[Path]:
    """Remove the leftovers of a killed writer of `path`, naming each; call it holding the lock of
    `path` (lsm_gnn.utils.locks.exclusive), so that no live writer's work is removed."""
    return [_remove(p, Path(path), say or _stderr) for p in leftovers(path)]


def sweep_leftovers(folder: str | os.PathLike, *, say=None) -> list[Path]:
    """Remove every temporary sibling that a killed atomic writer left anywhere under `folder`,
    naming each. Only for a folder in which no writer can be alive: the workflow calls it when a run
    starts, under its working directory's lock (workflow/Snakefile, `onstart`), so whoever made them
    was killed with an earlier run (tests/test_workflow_kill.py found one PNG's half-written sibling
    left that way)."""
    from lsm_gnn.utils.locks import is_locked

    say = say or _stderr
    removed = []
    for root, dirs, files in os.walk(folder):
        for name in sorted(dirs + files):
            m = _LEFTOVER.match(name)
            if m:
                removed.append(_remove(Path(root) / name, Path(root) / m["name"], say))
            elif (m := _LOCK.match(name)) and name in files and not is_locked(Path(root) / m["name"]):
                removed.append(_remove(Path(root) / name, Path(root) / m["name"], say))
        dirs[:] = [d for d in dirs if not is_leftover(d)]
    return removed


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path next to `path`; rename it onto `path` only if the block succeeds.
    `path` is checked first (lsm_gnn.utils.outpaths): a regular file or nothing."""
    path = check_output(path, "file")
    make_parent(path)
    with refused(path):
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial" + suffix, dir=path.parent)
    os.close(fd)
    tmp = Path(tmp)
    try:
        with refused(path, errnos=WRITE_ERRNOS):
            yield tmp
        with refused(path, "cannot rename the written file into place"):
            os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def write_json(path: str | os.PathLike, obj, indent: int = 2) -> None:
    write_text(path, json.dumps(obj, indent=indent, sort_keys=False, default=_json_default) + "\n")


def _json_default(o):
    import numpy as np

    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike) -> Iterator[Path]:
    """Build a directory under a temporary name; replace `path` with it only on success. `path` is
    checked first (lsm_gnn.utils.outpaths): a folder or nothing, never a symbolic link."""
    from lsm_gnn.utils.locks import exclusive

    path = check_output(path, "dir")
    make_parent(path)
    with exclusive(path, "directory"):
        remove_leftovers(path)
        tmp = temp_dir(path)
        try:
            with refused(path, errnos=WRITE_ERRNOS):
                yield tmp
            replace_dir(tmp, path)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)


def temp_dir(path: Path) -> Path:
    """A fresh temporary sibling folder of `path` (what `leftovers` finds if its builder is killed)."""
    with refused(path, "cannot create the output directory"):
        return Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent))


def replace_dir(tmp: Path, path: Path) -> None:
    """Put the finished folder `tmp` at `path` (replacing what was there)."""
    with refused(path, "cannot move the finished directory into place"):
        if path.exists():
            shutil.rmtree(path)
        os.replace(tmp, path)
