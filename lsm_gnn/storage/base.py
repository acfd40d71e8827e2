"""The feature-store interface every reader implements (direct, buffered, mmap, memory, GPU).

A store reads the rows of given ids (any order, duplicates allowed) into a caller's buffer and
counts exactly what it did: rows requested, distinct rows, I/O operations, bytes read from storage
(read amplification included) and time.
"""

from __future__ import annotations

import abc
from dataclasses import asdict, dataclass, field

import numpy as np


@dataclass
class IOCounters:
    rows_requested: int = 0
    distinct_rows: int = 0
    io_ops: int = 0
    bytes_read: int = 0
    seconds: float = 0.0

    def add(self, other: "IOCounters") -> None:
        for k, v in asdict(other).items():
            setattr(self, k, getattr(self, k) + v)

    def as_dict(self) -> dict:
        return asdict(self)

    def reset(self) -> None:
        for k in asdict(self):
            setattr(self, k, type(getattr(self, k))())


class FeatureStore(abc.ABC):
    """Rows of a feature file; subclasses implement `_read_distinct`."""

    reader_name: str = "abstract"

    def __init__(self, num_rows: int, dim: int, dtype: np.dtype):
        self.num_rows, self.dim, self.dtype = num_rows, dim, np.dtype(dtype)
        self.counters = IOCounters()
        self.path_info: dict = {"reader": self.reader_name}  # recorded in run records: which path ran

    @abc.abstractmethod
    def read_rows(self, ids: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Rows of `ids` in the order given; `out` is (len(ids), dim) of the store's dtype."""

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
