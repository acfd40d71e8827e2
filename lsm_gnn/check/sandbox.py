"""Real environment faults for the fault suite, inside one (forked, single-threaded) process.

`full_dir(path, nbytes)` and `readonly_dir(path)` make `path` a file system that is full after
`nbytes` bytes, or read-only. As root (or where unprivileged user namespaces are allowed) the
process moves into its own mount namespace (unshare(2)) and mounts a small tmpfs, so the kernel
answers ENOSPC / EROFS and the mount vanishes with the process; elsewhere a full disk is an
RLIMIT_FSIZE of `nbytes` per file (EFBIG, SIGXFSZ ignored) and read-only is a folder without
write permission. Each returns how it did it, which the suite prints.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
from pathlib import Path

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
MS_RDONLY, MS_REC, MS_PRIVATE = 1, 0x4000, 1 << 18

_libc = None
_namespace: bool | None = None


def _c():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


def _own_mount_namespace() -> bool:
    """Enter a private mount namespace once (False where the kernel refuses)."""
    global _namespace
    if _namespace is not None:
        return _namespace
    libc = _c()
    uid, gid = os.getuid(), os.getgid()
    flags = CLONE_NEWNS if uid == 0 else CLONE_NEWNS | CLONE_NEWUSER
    if libc.unshare(flags) != 0:
        _namespace = False
        return False
    if uid != 0:  # map ourselves to root of the new user namespace, which may mount
        try:
            Path("/proc/self/setgroups").write_text("deny")
            Path("/proc/self/uid_map").write_text(f"0 {uid} 1")
            Path("/proc/self/gid_map").write_text(f"0 {gid} 1")
        except OSError:
            _namespace = False
            return False
    # mounts made here must not propagate to the parent namespace
    _namespace = libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) == 0
    return _namespace


def _mount_tmpfs(path: Path, nbytes: int, readonly: bool = False) -> bool:
    opts = f"size={max(4096, int(nbytes))}".encode()
    return _c().mount(b"tmpfs", os.fsencode(path), b"tmpfs", MS_RDONLY if readonly else 0, opts) == 0


def full_dir(path: str | os.PathLike, nbytes: int, file_limit: int | None = None) -> str:
    """`path` holds `nbytes` at most (without a mount: no file may grow past `file_limit`, default
    `nbytes`)."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    if _own_mount_namespace() and _mount_tmpfs(path, nbytes):
        return f"tmpfs of {nbytes} bytes (ENOSPC)"
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    limit = int(file_limit or nbytes)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
    return f"RLIMIT_FSIZE of {limit} bytes (EFBIG)"


def readonly_dir(path: str | os.PathLike) -> str:
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    if _own_mount_namespace() and _mount_tmpfs(path, 1 << 20, readonly=True):
        return "read-only tmpfs (EROFS)"
    os.chmod(path, 0o555)
    return "folder without write permission (EACCES)" + (" (root ignores it)" if os.getuid() == 0 else "")
