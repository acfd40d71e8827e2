"""Feature rows onto a GPU: read into pinned host memory, then copy to the device; or kvikio (GDS).

Import-safe without a GPU: torch.cuda, cupy and kvikio are touched only when a store is opened.
kvikio imports on machines without a CUDA driver but cannot read anything there, so it is used
only when a real probe read of the feature file succeeds (`kvikio_status`).

Unlike the host readers, `read_rows` returns a torch tensor on the device (or fills the `out`
tensor given). Counters are the host reader's (same object) plus `h2d_bytes`.
"""

from __future__ import annotations

import numpy as np

from lsm_gnn.storage.base import FeatureStore, plan_reads
from lsm_gnn.utils.errors import InputError


def cuda_available() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # pragma: no cover - torch is a hard dependency
        return False


def kvikio_status(path=None) -> tuple[bool, str]:
    """Whether kvikio can really read (a 4 KiB probe read of `path` into device memory)."""
    try:
        import cupy
        import kvikio
    except Exception as e:
        return False, f"kvikio or cupy not importable ({type(e).__name__})"
    try:
        if not cupy.is_available():
            return False, "cupy sees no CUDA device"
        if path is None:
            return False, "no file to probe"
        buf = cupy.empty(4096, dtype=cupy.uint8)
        with kvikio.CuFile(str(path), "r") as f:
            n = f.pread(buf, 4096, 0).get()
        return (n == 4096), ("ok" if n == 4096 else f"probe read returned {n} bytes")
    except Exception as e:  # kvikio raises RuntimeError when libcuda is missing
        return False, f"kvikio probe read failed: {e}"


def _torch_dtype(dtype: np.dtype):
    import torch

    return torch.from_numpy(np.empty(0, dtype)).dtype


class PinnedDeviceStore(FeatureStore):
    """Host reader -> pinned staging buffer -> `copy_` to the device (synchronised per batch)."""

    reader_name = "gpu"

    def __init__(self, host: FeatureStore, device: str = "cuda"):
        if not cuda_available():
            raise InputError("reader 'gpu' needs a CUDA device; torch.cuda.is_available() is False here")
        import torch

        super().__init__(host.num_rows, host.dim, host.dtype, path=host.path)
        self.host, self.device = host, torch.device(device)
        self.counters = host.counters
        self.h2d_bytes = 0
        self._pinned = None
        self.path_info = {"reader": "gpu", "transfer": "pinned", "device": torch.cuda.get_device_name(self.device),
                          "host": host.path_info}

    def _staging(self, n: int):
        import torch

        if self._pinned is None or self._pinned.shape[0] < n:
            cap = max(n, 2 * (0 if self._pinned is None else self._pinned.shape[0]), 1024)
            self._pinned = torch.empty((cap, self.dim), dtype=_torch_dtype(self.dtype), pin_memory=True)
        return self._pinned[:n]

    def read_rows(self, ids, out=None, *, counters=None):
        import torch

        ids = np.asarray(ids)
        n = len(ids)
        staging = self._staging(n)
        self.host.read_rows(ids, out=staging.numpy(), counters=counters)
        if out is None:
            out = torch.empty((n, self.dim), dtype=staging.dtype, device=self.device)
        elif not (isinstance(out, torch.Tensor) and out.shape == (n, self.dim) and out.dtype == staging.dtype):
            raise InputError(f"{self.path}: out must be a torch tensor of shape {(n, self.dim)} and dtype "
                             f"{staging.dtype}")
        out.copy_(staging, non_blocking=True)
        torch.cuda.current_stream(self.device).synchronize()  # the staging buffer is reused next batch
        self.h2d_bytes += n * self.row_bytes
        return out

    def close(self) -> None:
        self.host.close()
        self._pinned = None


class KvikioStore(FeatureStore):
    """Block reads straight into device memory with kvikio (GPUDirect Storage, or its compat mode)."""

    reader_name = "gpu"

    def __init__(self, path, num_rows, dim, dtype, row_stride, file_bytes=None, *, block_size=4096,
                 max_io_bytes=1 << 20, row_map=None):
        ok, why = kvikio_status(path)
        if not ok:
            raise InputError(f"kvikio transfer unavailable: {why}")
        import kvikio

        super().__init__(num_rows, dim, dtype, path=path, row_map=row_map)
        self.row_stride, self.block, self.max_io_bytes = row_stride, block_size, max_io_bytes
        self.file = kvikio.CuFile(self.path, "r")
        self.h2d_bytes = 0
        self.path_info = {"reader": "gpu", "transfer": "kvikio", "file": self.path}

    def read_rows(self, ids, out=None, *, counters=None):  # pragma: no cover - needs a GPU with kvikio
        import cupy

        ids = self.check_ids(ids)
        uniq, inv = np.unique(ids, return_inverse=True)
        plan = plan_reads(uniq, self.row_stride, self.row_bytes, self.block, self.max_io_bytes)
        buf = cupy.empty(max(plan.total_bytes, 1), dtype=cupy.uint8)
        futs = [self.file.pread(buf[b: b + n], n, o) for o, b, n in
                zip(plan.file_offsets.tolist(), plan.buf_offsets.tolist(), plan.lengths.tolist())]
        for f, n, o in zip(futs, plan.lengths.tolist(), plan.file_offsets.tolist()):
            if f.get() != n:
                from lsm_gnn.utils.errors import DataError

                raise DataError(self.path, f"short read at offset {o}", expected=n, found="fewer bytes")
        pos = cupy.asarray(plan.row_pos[inv])
        idx = pos[:, None] + cupy.arange(self.row_bytes)[None, :]
        rows = buf[idx].view(cupy.dtype(self.dtype)).reshape(len(ids), self.dim)
        if out is not None:
            out[...] = rows
            rows = out
        c = self.counters if counters is None else counters
        c.rows_requested += len(ids)
        c.distinct_rows += len(uniq)
        c.io_ops += plan.io_ops
        c.bytes_read += plan.total_bytes
        c.useful_bytes += len(uniq) * self.row_bytes
        c.batches += 1
        return rows

    def close(self) -> None:
        if getattr(self, "file", None) is not None:
            self.file.close()
            self.file = None
