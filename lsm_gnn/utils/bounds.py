"""Sizes an input declares, checked before anything of that size is allocated.

A `.npy` header states a shape; a trace's header, a node count, a node id imply tables of their
size. `numpy.load` allocates what a header states before it reads a byte (a 66 KB file claiming
10**12 int64 values asked for 7.3 TiB), so every loader of a file a user hands us reads the header
first (`npy_header`, `check_npy`): the stated bytes must fit in the bytes the file holds and in
this machine's memory (`check_memory`). The errors name the file and the field.
"""

from __future__ import annotations

import os
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lsm_gnn.utils.errors import DataError


def memory_bytes() -> int:
    """This machine's physical memory (what no single table of an input may exceed)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        import psutil

        return int(psutil.virtual_memory().total)


def _gib(n: int | float) -> str:
    return f"{n / 2**30:,.1f} GiB"


def check_memory(nbytes: int | float, source, field: str, *, why: str = "") -> None:
    """A `DataError` naming `source` and `field` when a table of `nbytes` would not fit in this
    machine's memory (checked before it is allocated)."""
    total = memory_bytes()
    if nbytes > total:
        raise DataError(source, f"field {field}: {why or 'the size it states'} needs {_gib(nbytes)}, more than this "
                                f"machine's memory", expected=f"at most {_gib(total)}", found=_gib(nbytes))


NODE_TABLE_BYTES = 8 * 8
"""Bytes per node a dataset writer holds at once: about eight int64 tables of one entry per node
(CSC and CSR offsets, degrees, labels, the PageRank iterates); an estimate that errs high."""


def check_nodes(n: int, source, field: str = "num_nodes", *, why: str = "") -> None:
    """A node count checked against this machine's memory before any table of that size is built."""
    check_memory(n * NODE_TABLE_BYTES, source, field, why=why or f"{n:,} nodes")


@dataclass(frozen=True)
class NpyHeader:
    shape: tuple
    dtype: np.dtype
    fortran_order: bool
    offset: int  # bytes before the data

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=object)) * self.dtype.itemsize


def _read_header(fh, source) -> NpyHeader:
    from numpy.lib import format as npf

    try:
        version = npf.read_magic(fh)
        reader = {(1, 0): npf.read_array_header_1_0, (2, 0): npf.read_array_header_2_0}.get(version)
        if reader is None:
            raise ValueError(f"unsupported .npy version {version}")
        shape, fortran, dtype = reader(fh, max_header_size=10000)
    except (ValueError, OSError, EOFError, SyntaxError) as e:
        raise DataError(source, f"not a readable .npy file: {str(e)[:200]}") from None
    if dtype.hasobject:
        raise DataError(source, "field dtype: object arrays are never loaded", expected="a numeric dtype",
                        found=str(dtype))
    return NpyHeader(tuple(int(s) for s in shape), dtype, bool(fortran), fh.tell())


def npy_header(path: str | os.PathLike) -> NpyHeader:
    """The header of a .npy file, checked against the file's size and this machine's memory."""
    path = Path(path)
    try:
        with open(path, "rb") as fh:
            h = _read_header(fh, path)
            size = os.fstat(fh.fileno()).st_size
    except FileNotFoundError:
        raise DataError(path, "file does not exist") from None
    except OSError as e:
        raise DataError(path, f"cannot be read: {e.strerror or e}") from None
    _check_fits(h, size - h.offset, path, "header shape")
    return h


def _check_fits(h: NpyHeader, available: int, source, field: str) -> None:
    extent = int(np.prod([d for d in h.shape if d], dtype=object)) * h.dtype.itemsize
    if any(d < 0 for d in h.shape) or extent > np.iinfo(np.intp).max:  # numpy refuses these, even with a 0 dim
        raise DataError(source, f"field {field}: the header states {h.shape} {h.dtype}, beyond any array numpy "
                                "can make", expected=f"extents within {np.iinfo(np.intp).max:,} bytes",
                        found=f"{extent:,} bytes")
    if h.nbytes > available:
        raise DataError(source, f"field {field}: the header states {h.shape} {h.dtype} ({h.nbytes:,} bytes) but "
                                "the file holds fewer", expected=f"at most {max(available, 0):,} bytes of data",
                        found=f"{h.nbytes:,} bytes stated")
    check_memory(h.nbytes, source, field, why=f"an array of shape {h.shape} {h.dtype}")


def check_npz(path: str | os.PathLike, members: tuple[str, ...] | None = None) -> None:
    """Every array of a .npz (or those named in `members`, without `.npy`) checked as `npy_header`
    checks a file: the stated bytes within the member's stored size and this machine's memory,
    before `numpy.load` allocates them."""
    path = Path(path)
    try:
        with zipfile.ZipFile(path) as z:
            for info in z.infolist():
                name = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
                if members is not None and name not in members:
                    continue
                with z.open(info) as fh:
                    h = _read_header(fh, f"{path} ({info.filename})")
                _check_fits(h, info.file_size - h.offset, f"{path} ({info.filename})", "header shape")
    except (zipfile.BadZipFile, EOFError) as e:
        raise DataError(path, f"not a .npz file (or a truncated one): {e}") from None
    except FileNotFoundError:
        raise DataError(path, "file does not exist") from None
