"""Errors that name what was wrong: the file or field, what was expected, what was found."""

from __future__ import annotations

import errno
import os


class LsmGnnError(Exception):
    """Base of every error this project raises on purpose."""


MESSAGE_MAX = 2000
"""Characters of an error message: a value found in a file or a config (a 10 MB string, a 32 MB
expanded alias) is cut, never echoed whole (the part kept names the file, the key and the start)."""


def capped(text: str, limit: int = MESSAGE_MAX) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters in all)"


class DataError(LsmGnnError):
    """A file on disk does not match what its metadata (or its documented format) says."""

    def __init__(self, path: str | os.PathLike, problem: str, *, expected=None, found=None):
        self.path = os.fspath(path)
        self.problem = problem
        self.expected = expected
        self.found = found
        msg = f"{self.path}: {problem}"
        if expected is not None or found is not None:
            msg += f" (expected {capped(str(expected), 300)}, found {capped(str(found), 300)})"
        super().__init__(capped(msg))


class ConfigError(LsmGnnError):
    """A configuration value is unknown, of the wrong type or out of range."""

    def __init__(self, source: str, key: str, problem: str):
        self.source, self.key, self.problem = source, key, problem
        super().__init__(capped(f"{source}: {key}: {problem}"))


class InputError(LsmGnnError):
    """An argument given to an API (ids, buffers, dtypes) is invalid."""


class StateError(LsmGnnError):
    """An engine's own state is inconsistent (e.g. a cache policy's list of ways leaves its set):
    its decisions can no longer be trusted."""


class NumericalError(LsmGnnError):
    """A computed value (a training loss) is not finite although every input was."""


class DownloadError(LsmGnnError):
    """A remote file could not be fetched or did not match its size/checksum."""


class OutputError(LsmGnnError):
    """A file or directory cannot be written: disk full, read-only, no permission, not a directory.

    An environment fault, not a bug: the message names the path and what the system said."""

    def __init__(self, path: str | os.PathLike, problem: str):
        self.path = os.fspath(path)
        self.problem = problem
        super().__init__(capped(f"{self.path}: {problem}"))

    @classmethod
    def from_os_error(cls, path: str | os.PathLike, err: OSError, doing: str = "cannot write") -> "OutputError":
        return cls(path, f"{doing}: {describe_os_error(err)}")


class BusyError(OutputError):
    """Another process holds the lock of a path this one would write (a record, a dataset directory)."""


# the errno values of a full or refusing file system: an environment fault, named as such
_ENV_ERRNOS = {errno.ENOSPC: "no space left on device", errno.EDQUOT: "disk quota exceeded",
               errno.EFBIG: "file too large (the file-size limit of this process or file system)",
               errno.EROFS: "read-only file system", errno.EACCES: "permission denied",
               errno.EPERM: "operation not permitted", errno.ENOTDIR: "a path component is not a directory",
               errno.EISDIR: "is a directory", errno.ENOENT: "no such file or directory"}


def is_environment_error(err: BaseException) -> bool:
    """Whether `err` is the file system refusing a write (full, read-only, no permission...)."""
    return isinstance(err, OSError) and err.errno in _ENV_ERRNOS


def describe_os_error(err: OSError) -> str:
    what = _ENV_ERRNOS.get(err.errno) or err.strerror or str(err)
    where = f" ({err.filename})" if getattr(err, "filename", None) else ""
    return f"{what} [errno {err.errno}]{where}" if err.errno is not None else f"{what}{where}"


class DistributedError(LsmGnnError):
    """A peer rank failed or stopped answering."""

    def __init__(self, rank: int | None, problem: str):
        self.rank = rank
        who = f"rank {rank}" if rank is not None else "a peer rank"
        super().__init__(f"{who}: {problem}")


def reported_error(e: BaseException) -> str | None:
    """The `error: ...` line the command prints instead of a traceback, or None for a bug (one rule,
    used by the CLI's `main` and by the fault suite's in-process runs): an LsmGnnError, or the file system
    refusing a write that no writer named (full, read-only, no permission)."""
    if isinstance(e, LsmGnnError):
        return f"error: {e}"
    if isinstance(e, OSError) and is_environment_error(e) and e.errno != errno.ENOENT:
        return f"error: {describe_os_error(e)}"
    return None
