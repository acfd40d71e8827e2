"""Request traces: per device, per mini-batch, the feature rows (global ids) requested.

A trace is what the sampler produced for an epoch (or a window of it); the simulator replays it
through any cache configuration and computes the bounds on the same sequence. Stored as one
`.npz` (ids, per-(batch, device) offsets, and a JSON header) written atomically.
"""

from __future__ import annotations

import json
import os
import zipfile
from dataclasses import dataclass, field

import numpy as np

from lsm_gnn.utils.atomic import atomic_path
from lsm_gnn.utils.errors import DataError


@dataclass
class Trace:
    num_devices: int
    num_rows: int
    # batches[b][d]: int64 ids requested by device d in iteration b (duplicates possible)
    batches: list[list[np.ndarray]]
    meta: dict = field(default_factory=dict)

    @property
    def num_batches(self) -> int:
        return len(self.batches)

    def device(self, d: int) -> list[np.ndarray]:
        return [b[d] for b in self.batches]

    def total_requests(self) -> int:
        return int(sum(len(x) for b in self.batches for x in b))

    def save(self, path: str | os.PathLike) -> None:
        flat = [x for b in self.batches for x in b]
        offsets = np.zeros(len(flat) + 1, dtype=np.int64)
        np.cumsum([len(x) for x in flat], out=offsets[1:])
        ids = np.concatenate(flat) if flat else np.zeros(0, np.int64)
        header = {"num_devices": self.num_devices, "num_rows": self.num_rows,
                  "num_batches": self.num_batches, "meta": self.meta}
        with atomic_path(path, suffix=".npz") as tmp:
            with open(tmp, "wb") as f:
                np.savez(f, ids=ids.astype(np.int64), offsets=offsets,
                         header=np.frombuffer(json.dumps(header).encode(), dtype=np.uint8))

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Trace":
        """Read a trace, checking it as a dataset is checked on open: the header's fields, the
        arrays' dtypes, offsets from 0 to len(ids) that never decrease, ids in [0, num_rows)."""
        from lsm_gnn.utils.bounds import check_npz

        # the stated shapes within the file and memory, before numpy allocates them
        check_npz(path, ("header", "ids", "offsets"))
        try:
            with np.load(path) as z:
                header = json.loads(bytes(z["header"]).decode())
                ids, offsets = z["ids"], z["offsets"]
        except FileNotFoundError:
            raise DataError(path, "trace file does not exist") from None
        except (OSError, KeyError, ValueError, EOFError, zipfile.BadZipFile, UnicodeDecodeError) as e:  # a truncated .npz too
            raise DataError(path, f"not a trace file (or a truncated one): {type(e).__name__}: {e}") from None
        if not isinstance(header, dict):
            raise DataError(path, "header: expected a JSON object", found=type(header).__name__)
        for key in ("num_devices", "num_batches", "num_rows"):
            v = header.get(key)
            if not isinstance(v, int) or isinstance(v, bool) or v < (1 if key == "num_devices" else 0):
                raise DataError(path, f"header field {key}", expected="a non-negative integer", found=repr(v))
        for name, arr in (("ids", ids), ("offsets", offsets)):
            if arr.dtype != np.int64 or arr.ndim != 1:
                raise DataError(path, f"array {name}", expected="1-D int64", found=f"{arr.ndim}-D {arr.dtype}")
        g, nb = header["num_devices"], header["num_batches"]
        if len(offsets) != g * nb + 1 or offsets[-1] != len(ids):
            raise DataError(path, "offsets do not match ids", expected=g * nb + 1, found=len(offsets))
        from lsm_gnn.datasets.checks import index_range_problems, indptr_problems

        found = indptr_problems("offsets", offsets, len(ids)) + index_range_problems("ids", ids, header["num_rows"])
        if found:
            raise DataError(path, f"array {found[0]}")
        flat = [ids[offsets[i]: offsets[i + 1]] for i in range(g * nb)]
        batches = [flat[b * g:(b + 1) * g] for b in range(nb)]
        return cls(g, header["num_rows"], batches, header.get("meta", {}))
