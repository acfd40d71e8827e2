"""Errors that name what was wrong: the file or field, what was expected, what was found."""

from __future__ import annotations

import os


class LsmGnnError(Exception):
    """Base of every error this project raises on purpose."""


class DataError(LsmGnnError):
    """A file on disk does not match what its metadata (or its documented format) says."""

    def __init__(self, path: str | os.PathLike, problem: str, *, expected=None, found=None):
        self.path = os.fspath(path)
        self.problem = problem
        self.expected = expected
        self.found = found
        msg = f"{self.path}: {problem}"
        if expected is not None or found is not None:
            msg += f" (expected {expected}, found {found})"
        super().__init__(msg)


class ConfigError(LsmGnnError):
    """A configuration value is unknown, of the wrong type or out of range."""

    def __init__(self, source: str, key: str, problem: str):
        self.source, self.key, self.problem = source, key, problem
        super().__init__(f"{source}: {key}: {problem}")


class InputError(LsmGnnError):
    """An argument given to an API (ids, buffers, dtypes) is invalid."""


class DownloadError(LsmGnnError):
    """A remote file could not be fetched or did not match its size/checksum."""


class DistributedError(LsmGnnError):
    """A peer rank failed or stopped answering."""

    def __init__(self, rank: int | None, problem: str):
        self.rank = rank
        who = f"rank {rank}" if rank is not None else "a peer rank"
        super().__init__(f"{who}: {problem}")
