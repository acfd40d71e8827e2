"""The one rule for an output path, checked before any work starts.

Every writer of this project (atomic files, run records, dataset folders, reports) calls
`check_output(path, kind)` before it writes: what is at `path` must be what the writer replaces
(a regular file for a file, a folder for a folder) or nothing, never a device, a FIFO, a socket or
a symbolic link (a link would be replaced by a new regular file, not written through: the
kernel's rename(2) replaces the link itself); the folder it goes in must be a folder this process
may write; the name must fit the file system's limits (NAME_MAX, PATH_MAX from pathconf(3)),
with room for the writer's temporary sibling `.NAME.XXXXXXXX.partial[SUFFIX]` and its lock
`.NAME.lock`. A refusal is an `OutputError` naming the path and what is there.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from lsm_gnn.utils.errors import OutputError

# what the temporary sibling adds to NAME: "." + "." + 8 random + ".partial" + a suffix of up to 12
SIBLING_EXTRA = 1 + 1 + 8 + len(".partial") + 12


def _kind_of(mode: int) -> str:
    for test, name in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder"), (stat.S_ISREG, "a regular file")):
        if test(mode):
            return name
    return "not a regular file"


def _limit(folder: Path, name: str, default: int) -> int:
    try:
        return os.pathconf(folder, name)
    except (OSError, ValueError):
        return default


def _existing_ancestor(path: Path) -> Path:
    p = path.parent
    while not os.path.lexists(p) and p != p.parent:
        p = p.parent
    return p


def check_output(path: str | os.PathLike, kind: str = "file", what: str = "output") -> Path:
    """Check `path` as an output of `kind` before anything is written: "file" (replaced by the
    writer), "dir" (a folder replaced as a whole: a dataset) or "into" (a folder files are written
    into, which may be a symbolic link to a folder); return it
    made absolute (its folder's symlinks kept, its own name not resolved). An `OutputError` naming
    the path when it is refused."""
    if kind not in ("file", "dir", "into"):
        raise ValueError(f"kind must be 'file', 'dir' or 'into', not {kind!r}")
    if kind == "into" and os.path.isdir(path):  # a folder files are written into (a symlink to one is fine)
        if not os.access(path, os.W_OK | os.X_OK):
            raise OutputError(path, f"cannot write into the {what}: not writable (permission denied)")
        return Path(os.path.abspath(path))
    raw = os.fspath(path)
    if not raw:
        raise OutputError("''", f"the {what}'s path is empty")
    p = Path(os.path.abspath(raw))
    if p == p.parent:
        raise OutputError(raw, f"the {what}'s path is a file system's root; give a name below it")
    folder = _existing_ancestor(p)
    name_max = _limit(folder, "PC_NAME_MAX", 255)
    path_max = _limit(folder, "PC_PATH_MAX", 4096)
    for part in p.relative_to(folder).parts:
        n = len(os.fsencode(part))
        room = SIBLING_EXTRA if part == p.name else 0
        if n + room > name_max:
            raise OutputError(raw, f"the name {part[:40]!r}... is {n} bytes; this file system allows {name_max} "
                                   f"per name" + (f", less {room} for the writer's temporary sibling" if room else ""))
    if len(os.fsencode(str(p))) + SIBLING_EXTRA > path_max:
        raise OutputError(raw[:80] + "...", f"the path is {len(os.fsencode(str(p)))} bytes; this file system "
                                            f"allows {path_max}, less {SIBLING_EXTRA} for the writer's temporary "
                                            "sibling")
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        st = None
    except NotADirectoryError:
        st = None  # a file in the way of the folder: named below
    except OSError as e:
        raise OutputError.from_os_error(p, e, f"cannot check the {what}'s path") from None
    if st is not None:
        found = _kind_of(st.st_mode)
        wanted = "a regular file" if kind == "file" else "a folder"
        if kind == "into" and stat.S_ISLNK(st.st_mode):
            raise OutputError(raw, f"the {what}'s path is a symbolic link to {os.readlink(p)}, which is no folder")
        if stat.S_ISLNK(st.st_mode):
            raise OutputError(raw, f"the {what}'s path is a symbolic link (to {os.readlink(p)}); writing would replace "
                                   "the link, not what it points to: give the real path")
        if found != wanted:
            raise OutputError(raw, f"the {what}'s path is {found}, not {wanted}; nothing was written")
    if not folder.is_dir():
        raise OutputError(raw, f"cannot create the {what}'s folder: {folder} is {_kind_of(os.stat(folder).st_mode)}, "
                               "not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OutputError(raw, f"cannot write the {what}: the folder {folder} is not writable "
                               f"(permission denied [errno {errno.EACCES}])")
    return p


def output_option(kind: str = "file", what: str = "output"):
    """A click option callback: the path, when given, checked by `check_output` as the command line is
    parsed, before the command does any work (a benchmark's --output used to be refused only at
    its end)."""
    def callback(ctx, param, value):
        if value:
            check_output(value, kind, what)
        return value
    return callback
