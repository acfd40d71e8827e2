"""The exchange of the shared cache: counts, then ids, then rows back, over torch.distributed.

Every message is one `all_to_all_single` with uneven splits over a flat buffer (gloo cannot do list
`all_to_all` with uneven sizes; measured, see docs/multi-device.md): first the fixed-size per-peer
headers (counts), so each rank knows how much it receives, then the payload. Rows travel as raw
bytes, so any feature dtype works on gloo (CPU) and NCCL (CUDA) alike. Bytes are counted as what a
rank sends to *other* ranks (its own bucket never leaves the device); summed over ranks that is the
device-to-device traffic. A failed or timed-out collective becomes a `DistributedError`.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

import numpy as np
import torch
import torch.distributed as dist

from lsm_gnn.multidevice.health import NULL_HEARTBEAT, Heartbeat
from lsm_gnn.utils.errors import DistributedError, InputError


@dataclass
class ExchangeStats:
    id_bytes: int = 0        # ids + headers sent to other ranks
    row_bytes: int = 0       # feature rows sent to other ranks
    id_seconds: float = 0.0
    row_seconds: float = 0.0
    calls: int = 0

    @property
    def bytes(self) -> int:
        return self.id_bytes + self.row_bytes

    def as_dict(self) -> dict:
        return {**asdict(self), "bytes": self.bytes}


class Exchange:
    """All-to-all messages between the ranks of the default (or a given) process group."""

    def __init__(self, rank: int, world_size: int, *, device: str | torch.device = "cpu", group=None,
                 heartbeat: Heartbeat = NULL_HEARTBEAT):
        self.rank, self.world_size = rank, world_size
        self.device = torch.device(device)
        self.group = group
        self.heartbeat = heartbeat
        self.stats = ExchangeStats()

    # ---- low level -----------------------------------------------------------------------------
    def _all_to_all(self, send: np.ndarray, send_splits, recv_splits, what: str) -> np.ndarray:
        """One flat all_to_all_single of a 1-D numpy array; splits in elements."""
        send_t = torch.from_numpy(np.ascontiguousarray(send))
        if self.device.type != "cpu":
            send_t = send_t.to(self.device, non_blocking=True)
        recv_t = torch.empty(int(np.sum(recv_splits)), dtype=send_t.dtype, device=self.device)
        try:
            with self.heartbeat.collective():
                dist.all_to_all_single(recv_t, send_t, output_split_sizes=[int(x) for x in recv_splits],
                                       input_split_sizes=[int(x) for x in send_splits], group=self.group)
        except (RuntimeError, ValueError) as e:  # gloo/NCCL report a dead or silent peer this way
            raise DistributedError(None, f"exchange of {what} failed on rank {self.rank}: "
                                         f"{str(e).splitlines()[0] if str(e) else type(e).__name__}") from e
        return recv_t.cpu().numpy() if self.device.type != "cpu" else recv_t.numpy()

    def _peer_sum(self, splits, unit: int) -> int:
        return int(sum(int(s) for r, s in enumerate(splits) if r != self.rank)) * unit

    # ---- messages --------------------------------------------------------------------------------
    def headers(self, send: np.ndarray) -> np.ndarray:
        """Exchange a fixed-size int64 header per peer: send[(G, k)] -> received[(G, k)]."""
        send = np.ascontiguousarray(send, dtype=np.int64)
        if send.ndim != 2 or send.shape[0] != self.world_size:
            raise InputError(f"headers: expected shape ({self.world_size}, k), found {send.shape}")
        k = send.shape[1]
        t0 = time.perf_counter()
        splits = [k] * self.world_size
        out = self._all_to_all(send.reshape(-1), splits, splits, "counts").reshape(self.world_size, k)
        self.stats.id_seconds += time.perf_counter() - t0
        self.stats.id_bytes += self._peer_sum(splits, 8)
        return out

    def ids(self, send_ids: np.ndarray, send_counts, recv_counts) -> np.ndarray:
        """Send bucket r of `send_ids` (send_counts[r] ids) to rank r; receive recv_counts[r] from r."""
        t0 = time.perf_counter()
        out = self._all_to_all(np.asarray(send_ids, dtype=np.int64), send_counts, recv_counts, "ids")
        self.stats.id_seconds += time.perf_counter() - t0
        self.stats.id_bytes += self._peer_sum(send_counts, 8)
        return out

    def rows(self, rows: np.ndarray, send_counts, recv_counts) -> np.ndarray:
        """Send rows[(n, dim)] in per-rank blocks of send_counts rows; receive recv_counts rows."""
        rows = np.ascontiguousarray(rows)
        row_bytes = rows.shape[1] * rows.dtype.itemsize
        t0 = time.perf_counter()
        flat = rows.view(np.uint8).reshape(-1)
        out = self._all_to_all(flat, [int(c) * row_bytes for c in send_counts],
                               [int(c) * row_bytes for c in recv_counts], "rows")
        self.stats.row_seconds += time.perf_counter() - t0
        self.stats.row_bytes += self._peer_sum(send_counts, row_bytes)
        self.stats.calls += 1
        return out.view(rows.dtype).reshape(-1, rows.shape[1])

    def barrier(self) -> None:
        try:
            with self.heartbeat.collective():
                dist.barrier(group=self.group)
        except RuntimeError as e:
            raise DistributedError(None, f"barrier failed on rank {self.rank}: {str(e).splitlines()[0]}") from e
