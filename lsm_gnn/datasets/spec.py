"""The constants and small rules of the lsm-gnn dataset format (docs/dataset-format.md).

Imported by the writer and reader (`format.py`), the one checker (`checks.py`) and the row
checksums (`checksums.py`); it imports none of them.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from lsm_gnn.utils.errors import DataError

FORMAT_NAME = "lsm-gnn-dataset"
FORMAT_VERSION = 1
SECTOR = 512          # O_DIRECT alignment unit (logical block size)
BLOCK = 4096          # storage block: reads are issued in whole 4 KiB blocks
FEATURE_FILE = "features.bin"
METADATA_FILE = "metadata.json"
METADATA_HASH_FILE = "metadata.sha256"   # `sha256sum -c` format: the hash of metadata.json
CHECKSUM_FILE = "features.xxh3.npy"      # one uint64 xxh3_64 per feature row (checksums.py)
HASH_CHUNK = 1 << 24
FEATURE_DTYPES = ("float32", "float16", "float64")
"""Feature dtypes the format allows: the models read floats (an int32 file trained to losses of
1e9 when its dtype was not checked)."""
SPLITS = ("train", "val", "test")


def row_stride_for(row_bytes: int) -> int:
    """Bytes between consecutive rows: rows never straddle a 512-byte sector needlessly.

    Rows of at least 512 bytes are padded to a multiple of 512; smaller rows to the next power of
    two, so several rows share a sector but none crosses one.
    """
    if row_bytes <= 0:
        raise ValueError("row_bytes must be positive")
    if row_bytes >= SECTOR:
        return -(-row_bytes // SECTOR) * SECTOR
    return 1 << (row_bytes - 1).bit_length()


def padded_file_bytes(num_rows: int, row_stride: int) -> int:
    """features.bin's size: the rows padded to whole 4 KiB blocks."""
    return -(-num_rows * row_stride // BLOCK) * BLOCK


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in chunks (the checksum metadata.json records)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(HASH_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def sha256_line(text_bytes: bytes, name: str = METADATA_FILE) -> str:
    """The line of `metadata.sha256`: what `sha256sum metadata.json` prints."""
    return f"{hashlib.sha256(text_bytes).hexdigest()}  {name}\n"


def read_npy_header(fh, path, problem: str = "not a readable .npy file") -> tuple[tuple, bool, np.dtype, int]:
    """(shape, fortran_order, dtype, data offset) of the .npy file open at its start as `fh`;
    DataError naming `path` (`problem`: what to call an unreadable header)."""
    try:
        version = np.lib.format.read_magic(fh)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(fh)
        else:
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(fh)
    except (ValueError, SyntaxError, EOFError, OSError) as e:
        raise DataError(path, f"{problem}: {e}") from None
    return tuple(shape), bool(fortran), np.dtype(dtype), fh.tell()


def npy_header(path: Path) -> tuple[tuple, np.dtype]:
    """(shape, dtype) from a .npy header; DataError if it is unreadable or the data is truncated."""
    try:
        fh = open(path, "rb")
    except OSError as e:
        raise DataError(path, f"cannot be read: {e.strerror}") from None
    with fh:
        shape, _, dtype, offset = read_npy_header(fh, path)
    need = offset + int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    size = path.stat().st_size
    if size < need:
        raise DataError(path, f"truncated: the .npy header announces shape {tuple(shape)} of {dtype}",
                        expected=f"{need} bytes", found=f"{size} bytes")
    return tuple(shape), np.dtype(dtype)
