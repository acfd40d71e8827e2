"""Read plans: which storage blocks a set of rows needs, merged into as few reads as possible.

A plan turns sorted distinct row ids into I/O operations over whole blocks (4 KiB by default):
each block is read once even if several requested rows share it (read amplification when rows are
smaller than a block), adjacent blocks are merged into one read up to `max_io_bytes`, and the
blocks are packed back to back in a staging buffer so that every row can be gathered out of it.
The plan is pure arithmetic (no I/O), which is what makes the accounting exact and testable.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ReadPlan:
    file_offsets: np.ndarray  # int64 byte offset in the file of each read
    lengths: np.ndarray       # int64 bytes of each read (whole blocks)
    buf_offsets: np.ndarray   # int64 byte offset in the staging buffer of each read
    row_pos: np.ndarray       # int64 byte offset in the staging buffer of each distinct row
    total_bytes: int          # staging bytes = bytes read from storage
    blocks: int               # distinct blocks

    @property
    def io_ops(self) -> int:
        return len(self.lengths)


def row_blocks(rows: np.ndarray, row_stride: int, row_bytes: int, block: int) -> tuple[np.ndarray, np.ndarray]:
    """First and last block (inclusive) holding each row."""
    start = rows * row_stride
    return start // block, (start + row_bytes - 1) // block


def distinct_blocks(rows_sorted: np.ndarray, row_stride: int, row_bytes: int, block: int) -> np.ndarray:
    """The sorted distinct blocks that hold the given sorted distinct rows."""
    if len(rows_sorted) == 0:
        return np.empty(0, np.int64)
    first, last = row_blocks(rows_sorted, row_stride, row_bytes, block)
    span = last - first + 1
    if int(span.max()) == 1:
        blocks = first
    else:  # rows longer than a block, or straddling one: expand each row's block range
        rep = np.repeat(first - np.cumsum(span) + span, span)
        blocks = rep + np.arange(int(span.sum()), dtype=np.int64)
    # rows are sorted, so blocks are non-decreasing; duplicates are shared blocks
    keep = np.empty(len(blocks), bool)
    keep[0] = True
    np.not_equal(blocks[1:], blocks[:-1], out=keep[1:])
    return blocks[keep]


def plan_reads(rows_sorted: np.ndarray, row_stride: int, row_bytes: int, block: int = 4096,
               max_io_bytes: int = 1 << 20) -> ReadPlan:
    """Plan the block reads for sorted distinct `rows_sorted` (int64)."""
    rows_sorted = np.asarray(rows_sorted, dtype=np.int64)
    blocks = distinct_blocks(rows_sorted, row_stride, row_bytes, block)
    nb = len(blocks)
    if nb == 0:
        z = np.empty(0, np.int64)
        return ReadPlan(z, z, z, z, 0, 0)
    max_blocks = max(1, max_io_bytes // block)
    idx = np.arange(nb, dtype=np.int64)
    new_run = np.empty(nb, bool)
    new_run[0] = True
    np.not_equal(np.diff(blocks), 1, out=new_run[1:])
    if max_blocks < nb:  # split long runs into reads of at most max_io_bytes
        run_start = np.maximum.accumulate(np.where(new_run, idx, 0))
        new_run |= (idx - run_start) % max_blocks == 0
    starts = np.flatnonzero(new_run)
    ends = np.append(starts[1:], nb)
    first, _ = row_blocks(rows_sorted, row_stride, row_bytes, block)
    row_pos = np.searchsorted(blocks, first) * block + (rows_sorted * row_stride - first * block)
    return ReadPlan(file_offsets=blocks[starts] * block, lengths=(ends - starts) * block,
                    buf_offsets=starts * block, row_pos=row_pos, total_bytes=nb * block, blocks=nb)
