"""Page-cache hygiene: drop a file's cached pages and measure how much of it is resident.

`drop_file_cache` flushes dirty pages (DONTNEED skips them) then calls
`posix_fadvise(POSIX_FADV_DONTNEED)`, so a measured run starts cold in this guest (a VM host may
still cache underneath: guest-cold is not always device-cold). `resident_pages` asks the kernel
with `mincore(2)` over a read-only mapping; the direct reader must leave it at zero.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
from pathlib import Path

import numpy as np

from lsm_gnn.utils.errors import DataError

PAGE = mmap.PAGESIZE
_CHUNK = 1 << 30  # map at most 1 GiB at a time

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
_MAP_FAILED = ctypes.c_void_p(-1).value


def drop_file_cache(path: str | os.PathLike) -> None:
    """Evict the file's pages from the page cache (after flushing any dirty ones)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as e:
        raise DataError(path, f"cannot open to drop its cached pages: {e.strerror}") from None
    try:
        os.fdatasync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def resident_pages(path: str | os.PathLike) -> np.ndarray:
    """One bool per page of the file: True where the page is in the page cache (mincore)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as e:
        raise DataError(path, f"cannot open to check its cached pages: {e.strerror}") from None
    try:
        size = os.fstat(fd).st_size
        npages = -(-size // PAGE)
        vec = np.zeros(npages, dtype=np.uint8)
        for off in range(0, size, _CHUNK):
            length = min(_CHUNK, size - off)
            addr = _libc.mmap(None, length, mmap.PROT_READ, mmap.MAP_SHARED, fd, off)
            if addr in (None, _MAP_FAILED):
                err = ctypes.get_errno()
                raise DataError(path, f"mmap for mincore failed: {os.strerror(err)}")
            try:
                part = vec[off // PAGE: off // PAGE + -(-length // PAGE)]
                if _libc.mincore(addr, length, part.ctypes.data) != 0:
                    err = ctypes.get_errno()
                    raise DataError(path, f"mincore failed: {os.strerror(err)}")
            finally:
                _libc.munmap(addr, length)
        return (vec & 1).astype(bool)
    finally:
        os.close(fd)


def resident_fraction(path: str | os.PathLike) -> float:
    """Fraction of the file's pages that are in the page cache (0.0 for an empty file)."""
    pages = resident_pages(path)
    return float(pages.mean()) if pages.size else 0.0


def kernel_read_bytes() -> int:
    """Bytes this process caused to be read from storage (page faults and readahead included)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("read_bytes:"):
            return int(line.split()[1])
    return 0
