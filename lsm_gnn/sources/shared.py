"""The shared-cache feature source of one rank (and its isolated-mode counterpart).

Shared mode (LSM-GNN): rank r owns the rows v with v % G == r. Its local source (the cache over
its own owner file, as lsm_gnn.sources.factory.make_feature_source builds it) serves only those rows,
for every rank. Per iteration, `fetch(ids)` splits the ids by owner, exchanges counts then ids,
serves the ids it received through the local source (one call, so the same row asked by two
ranks is read once), sends the rows back and reorders them into the requester's order.

Two data planes, chosen by where the local source's rows live (`plane="auto"`):
- host (rows in host memory, numpy): the numba split and memcpy reorder of ownership.py; the
  exchange over gloo wraps the arrays without a copy (with NCCL it copies them to the device
  and back);
- device (the local source's `device` is CUDA: lsm_gnn.sources.cached_device's
  DeviceCachedFeatureSource): the ids go to the device once, the split and the reorder run as
  CUDA kernels (cuda/owner_split.cu, cuda/reorder.cu via multidevice.gpu) on torch's current
  stream, counts, ids and rows travel as device tensors (NCCL), and `fetch` returns a tensor on
  the device. The ids an owner received cross to the host once (8 bytes a row; its cache
  engine decides on the host), the rows never do.
Both planes make the same split and the same reorder, so they return the same rows: one fetch
(`SharedCacheFeatureSource._fetch`) runs the stages for both, and a plane (`_HostPlane`,
`_DevicePlane`) says only where the rows land.

`advance(window)` announces this rank's next W batches to their owners, W batches ahead, so each
owner's cache sees the future requests of *every* rank (reuse tags and the victim-buffer
prefetcher need them). Only batches the owners have not seen yet travel: a rank compares the new
window with the one it announced before (shifted by the fetches since) and sends a per-owner
header `[shift, kept, new, counts...]` plus the new batches' ids. The decision is local and the
header carries it, so the ranks never have to agree on it in advance. The lookahead is host data
on both planes.

Isolated mode (the multi-GPU GIDS baseline, no exchange) is lsm_gnn.sources.isolated.
"""

from __future__ import annotations

import time
from typing import Sequence

import numpy as np
import torch

from lsm_gnn.cache.budget import for_devices
from lsm_gnn.cache.rowpool import OutputRows
from lsm_gnn.contract import FeatureSource, TierCounters, as_source
from lsm_gnn.multidevice.exchange import Exchange
from lsm_gnn.multidevice.health import NULL_HEARTBEAT, FaultInjector, Heartbeat
from lsm_gnn.ownership import check_owned, reorder_blocks, split_valid_ids
from lsm_gnn.metrics import EXCHANGE_STAGES
from lsm_gnn.utils.errors import InputError

HEADER = 3  # shift, kept, new


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a is b or (a.shape == b.shape and np.array_equal(a, b))


def _on_host(a):
    """A tensor as a numpy array on the host (the device plane's received ids cross once)."""
    return a.cpu().numpy() if isinstance(a, torch.Tensor) else a


# ---- where rows land: the two planes of one fetch (SharedCacheFeatureSource._fetch) ---------------
class _HostPlane:
    """Rows in host memory, numpy: the numba split, the counts as headers, the rows back by the
    exchange's host transport (`send_rows`), the memcpy reorder into reused output arrays."""

    def __init__(self, exchange: Exchange, row_dim: int, dtype: np.dtype):
        self.ex, self.row_dim, self.dtype = exchange, row_dim, dtype
        self._out = None   # reused output arrays (cache.rowpool.OutputRows)

    def split(self, ids: np.ndarray):
        s = split_valid_ids(ids, self.ex.world_size)
        return s.send_ids, s.positions, s.counts

    def exchange_counts(self, counts: np.ndarray):
        return counts, self.ex.headers(counts[:, None])[:, 0]

    def rows(self, served) -> np.ndarray:
        return np.asarray(_on_host(served)).astype(self.dtype, copy=False)

    def send_rows(self, served, recv_counts, send_counts):
        return self.ex.send_rows(served, recv_counts, send_counts)

    def reorder(self, received, positions) -> np.ndarray:
        if self._out is None:
            self._out = OutputRows(self.row_dim, received.dtype)
        return reorder_blocks(received.blocks, positions, self._out.get(len(received)))


class _DevicePlane:
    """Rows on the owner's torch device: the ids go there once, the split and the reorder run as
    CUDA kernels (multidevice.gpu), counts, ids and rows travel as device tensors."""

    def __init__(self, exchange: Exchange, dtype: np.dtype, device: torch.device):
        self.ex, self.device = exchange, device
        self.torch_dtype = torch.from_numpy(np.empty(0, dtype)).dtype

    def split(self, ids: np.ndarray):
        from lsm_gnn.multidevice import gpu

        ids_t = torch.from_numpy(ids if ids.flags.writeable else ids.copy()).to(self.device)
        return gpu.split_by_owner_tensor(ids_t, self.ex.world_size)

    def exchange_counts(self, counts: torch.Tensor):
        G = self.ex.world_size
        recv_counts = self.ex.counts(counts)
        # split sizes are host integers: one copy for both directions
        both = torch.cat([counts.to(recv_counts.device), recv_counts]).cpu().numpy()
        return both[:G], both[G:]

    def rows(self, served) -> torch.Tensor:
        if not isinstance(served, torch.Tensor):
            served = torch.from_numpy(np.ascontiguousarray(served))
        return served.to(device=self.device, dtype=self.torch_dtype)

    def send_rows(self, served, recv_counts, send_counts) -> torch.Tensor:
        return self.ex.rows(served, recv_counts, send_counts).to(self.device)

    def reorder(self, received, positions) -> torch.Tensor:
        from lsm_gnn.multidevice import gpu

        return gpu.reorder_tensor(received, positions)


class _OverOwnerCache(FeatureSource):
    """A rank's source over one cache (`self.cache`, a FeatureSource): the storage under it, its
    stage timers and its lifetime are the cache's."""

    @property
    def fetch_stage(self) -> str:
        return self.cache.fetch_stage

    def stage_seconds(self) -> dict | None:
        return self.cache.stage_seconds()

    def io_counters(self):
        return self.cache.io_counters()

    def storage_info(self) -> dict:
        return self.cache.storage_info()

    def close(self) -> None:
        self.cache.close()


class SharedCacheFeatureSource(_OverOwnerCache):
    """FeatureSource of rank `rank` in shared mode; `owner_cache` serves the rows this rank owns.
    `plane`: "auto" (device when the owner's rows are on a CUDA device, else host), "host" or
    "device" (the device plane on the owner's device, CPU included: how the tests run it)."""

    def __init__(self, owner_cache, exchange: Exchange, *, num_rows: int, row_dim: int, dtype,
                 max_horizon: int, heartbeat: Heartbeat = NULL_HEARTBEAT, fault: FaultInjector | None = None,
                 plane: str = "auto", testbed: dict | None = None):
        self.cache = as_source(owner_cache)
        self.ex = exchange
        self.rank, self.world_size = exchange.rank, exchange.world_size
        self.num_rows, self.row_dim, self.dtype = num_rows, row_dim, np.dtype(dtype)
        self.max_horizon = max_horizon
        self.heartbeat = heartbeat
        self.fault = fault or FaultInjector(self.rank)
        owner_device = torch.device(self.cache.device)
        if plane == "auto":
            plane = "device" if owner_device.type == "cuda" else "host"
        if plane not in ("host", "device"):
            raise InputError(f"plane must be auto, host or device, found {plane!r}")
        self.plane = plane
        self.device = owner_device if plane == "device" else "cpu"
        self._plane = (_DevicePlane(exchange, self.dtype, owner_device) if plane == "device"
                       else _HostPlane(exchange, self.row_dim, self.dtype))
        self.counters = TierCounters()
        self.peer_rows = 0          # rows this rank received from other owners
        self.served_for_peers = 0   # rows this rank's cache served to other ranks
        self.coalesced = 0          # requests served by another request's row in the same fetch
        # per fetch: split, exchange_ids, serve, exchange_rows, reorder; per advance: window, and
        # inside it window_exchange_ids, the lookahead's exchange of ids (stage_seconds counts it)
        self.times = {"split": 0.0, "exchange_ids": 0.0, "serve": 0.0, "exchange_rows": 0.0,
                      "reorder": 0.0, "window": 0.0, "window_exchange_ids": 0.0}
        self._announced: list[np.ndarray] = []              # my future batches, as announced
        self._future: list[list[np.ndarray]] = [[] for _ in range(self.world_size)]  # owner view
        self._fetches_since_advance = 0
        self.iterations = 0
        # the emulated testbed (emulation.testbed, resolved by the harness): the exchange charged as PCIe
        # peer-to-peer, the owner's cache work at the GPU engine's measured rate (lsm_gnn.testbed)
        self.testbed = testbed
        self.charger = None
        if testbed:
            from lsm_gnn.storage.charge import charger_for

            self.charger = charger_for(testbed)
            self.charger.windowed = True

    # ---- lookahead ------------------------------------------------------------------------------
    def _advance(self, window: Sequence[np.ndarray]) -> None:
        t0 = time.perf_counter()
        self.heartbeat.beat()
        if len(window) > self.max_horizon:
            raise InputError(f"advance: {len(window)} batches announced, more than the lookahead horizon of "
                             f"{self.max_horizon} (CacheConfig.horizon: cache.window, or cache.lookahead for horizon)")
        G = self.world_size
        shift = self._fetches_since_advance
        candidates = self._announced[shift:]
        kept = 0
        while kept < min(len(candidates), len(window)) and _same(window[kept], candidates[kept]):
            kept += 1
        new = window[kept:]
        splits = [split_valid_ids(b, G) for b in new]
        header = np.zeros((G, HEADER + self.max_horizon), dtype=np.int64)
        header[:, 0], header[:, 1], header[:, 2] = shift, kept, len(new)
        for j, s in enumerate(splits):
            header[:, HEADER + j] = s.counts
        send_counts = header[:, HEADER:].sum(axis=1)
        # ids to owner o: the o-bucket of every new batch, batch after batch
        send = np.concatenate([s.bucket(o) for o in range(G) for s in splits]) if splits else np.zeros(0, np.int64)
        t_ex = time.perf_counter()
        recv_header = self.ex.headers(header)
        recv = self.ex.ids(send, send_counts, recv_header[:, HEADER:].sum(axis=1))
        self.times["window_exchange_ids"] += time.perf_counter() - t_ex
        self._announced = window
        self._fetches_since_advance = 0
        # owner side: rebuild each requester's window of rows I own
        pos = 0
        for r in range(G):
            r_shift, r_kept, r_new = (int(x) for x in recv_header[r, :HEADER])
            fut = self._future[r][r_shift: r_shift + r_kept]
            for j in range(r_new):
                c = int(recv_header[r, HEADER + j])
                fut.append(recv[pos: pos + c])
                pos += c
            self._future[r] = fut
        depth = max((len(f) for f in self._future), default=0)
        owner_window = [np.concatenate([f[k] for f in self._future if k < len(f)] or [np.zeros(0, np.int64)])
                        for k in range(depth)]
        self.cache._advance(owner_window)   # ids the ranks validated at their public entry
        self.times["window"] += time.perf_counter() - t0

    # ---- one iteration ----------------------------------------------------------------------------
    def _fetch(self, ids: np.ndarray):
        """One iteration on either plane (`self._plane` says where the rows land): split by owner,
        exchange counts then ids, serve, send the rows back, reorder (times are the host's: on
        CUDA, launching the work; the count and id copies to the host wait for it)."""
        self.fault.tick()
        self.heartbeat.beat()
        plane, ex, ch = self._plane, self.ex, self.charger
        t0 = time.perf_counter()
        send_ids, positions, counts = plane.split(ids)
        t1 = time.perf_counter()
        send_counts, recv_counts = plane.exchange_counts(counts)
        th = time.perf_counter_ns()  # the counts' collective: every peer has arrived
        recv_ids = _on_host(ex.ids(send_ids, send_counts, recv_counts))
        if ch is not None:
            self._charge_link("exchange_ids", th, send_counts, recv_counts, 8)
        t2 = time.perf_counter()
        self._check_owned(recv_ids)
        if ch is None:
            served = self._serve(recv_ids, recv_counts)
        else:
            served = self._serve_charged(recv_ids, recv_counts)
        t3 = time.perf_counter()
        if ch is not None:  # a meeting of the peers first, so that a peer's slower serve is not the link's
            ex.headers(np.zeros((self.world_size, 1), np.int64))
            tr = time.perf_counter_ns()
        received = plane.send_rows(served, recv_counts, send_counts)
        if ch is not None:
            self._charge_link("exchange_rows", tr, recv_counts, send_counts, self.row_dim * self.dtype.itemsize)
        t4 = time.perf_counter()
        out = plane.reorder(received, positions)
        t5 = time.perf_counter()
        self._count(ids, send_counts, recv_counts, (t0, t1, t2, t3, t4, t5))
        return out

    def _charge_link(self, stage: str, start_ns: int, send_counts, recv_counts, unit_bytes: int) -> None:
        """The exchange as PCIe peer-to-peer (the paper's node has no NVLink): this device's larger
        direction (bytes to the other devices, bytes from them) over the link, one latency."""
        me = self.rank
        out = int(np.sum(send_counts)) - int(send_counts[me])
        inn = int(np.sum(recv_counts)) - int(recv_counts[me])
        pcie = self.testbed["pcie"]
        self.charger.link(stage, "pcie", start_ns, max(out, inn) * unit_bytes, pcie["bandwidth"], pcie["latency_s"],
                          transfers=1 if max(out, inn) else 0)

    def _serve_charged(self, recv_ids: np.ndarray, recv_counts: np.ndarray):
        """_serve, its cache work (everything but the storage reads and the victim buffer, which their
        own parts pace) ending at the GPU engine's measured rate for the requests (lsm_gnn.testbed.GPU_RATES)."""
        from lsm_gnn.testbed import GPU_RATES

        before = self.cache.stage_seconds() or {}
        t0, c0 = time.perf_counter_ns(), time.thread_time_ns()
        served = self._serve(recv_ids, recv_counts)
        cpu = time.thread_time_ns() - c0  # this thread's CPU time: the work itself, not its queueing
        after = self.cache.stage_seconds() or {}
        io_ns = round(1e9 * sum(max(0.0, after.get(k, 0.0) - before.get(k, 0.0)) for k in ("storage", "victim")))
        # the cache's own work starts after the reads it waited on: its deadline is shifted by them
        self.charger.until("fetch_cache", "gpu", t0 + io_ns, GPU_RATES["fetch_cache"].seconds(len(recv_ids)),
                           work_cpu_ns=cpu)
        return served

    def _check_owned(self, recv_ids: np.ndarray) -> None:
        check_owned(recv_ids, self.world_size, self.rank, f"rank {self.rank} received ids it does not own")

    def _count(self, ids, send_counts, recv_counts, t) -> None:
        self.counters.requests += len(ids)
        self.counters.distinct += len(np.unique(ids))
        self.peer_rows += int(send_counts.sum() - send_counts[self.rank])
        self.served_for_peers += int(recv_counts.sum() - recv_counts[self.rank])
        for k, a, b in zip(("split", "exchange_ids", "serve", "exchange_rows", "reorder"), t, t[1:]):
            self.times[k] += b - a
        self._fetches_since_advance += 1
        self.iterations += 1

    def _serve(self, recv_ids: np.ndarray, recv_counts: np.ndarray):
        """Rows of every id received, through the owner's source in one call: a numpy array on
        the host plane, a tensor on the device plane."""
        c = self.cache.counters
        before = (c.local_hits, c.victim_hits, c.storage_rows, c.distinct)
        # validated once: by each requester's public fetch (range) and _check_owned (owner)
        served = self._plane.rows(self.cache._fetch(recv_ids))
        if tuple(served.shape) != (len(recv_ids), self.row_dim):
            raise InputError(f"owner cache of rank {self.rank} returned {tuple(served.shape)} rows for "
                             f"{len(recv_ids)} ids")
        hits, victim_hits, storage_rows, distinct = (a - b for a, b in zip(
            (c.local_hits, c.victim_hits, c.storage_rows, c.distinct), before))
        # The owner's cache hits split into rows asked by this rank (local) and by peers: exact
        # when the cache reports per-row tiers, else attributed to the owner as local hits.
        tiers = self.cache.last_tiers
        if tiers is not None and len(tiers) == len(recv_ids):
            own = np.zeros(len(recv_ids), dtype=bool)
            off = np.concatenate([[0], np.cumsum(recv_counts)])
            own[off[self.rank]: off[self.rank + 1]] = True
            hit = np.asarray(tiers) == 0
            self.counters.local_hits += int((hit & own).sum())
            self.counters.peer_hits += int((hit & ~own).sum())
        else:
            self.counters.local_hits += hits
        self.counters.victim_hits += victim_hits
        self.counters.storage_rows += storage_rows
        self.coalesced += len(recv_ids) - distinct
        return served

    # ---- reporting ----------------------------------------------------------------------------------
    def stage_seconds(self) -> dict:
        """The owner cache's stages (none when it has no timers) and the exchange's, named as the
        record's stages (EXCHANGE_STAGES): the ids, the fetch's exchange and the lookahead's
        (`window_exchange_ids`: only its exchange calls, not the window's bookkeeping), and the
        rows sent back. The loader splits each fetch's wall time with them (fetch_split)."""
        exchange = {k: self.times[k] + self.times.get(f"window_{k}", 0.0) for k in EXCHANGE_STAGES}
        return {**(self.cache.stage_seconds() or {}), **exchange}

    def stats(self) -> dict:
        out = self.cache.stats()
        out.update({f"{k}_s": v for k, v in self.times.items()})
        out.update({f"exchange_{k}": v for k, v in self.ex.stats.as_dict().items()})
        if self.charger is not None:
            from lsm_gnn.storage.charge import raw_as_stats

            out.update(raw_as_stats(self.charger.raw()))
        out["exchange_transport"] = self.ex.transport
        if self.ex.transport_note:
            out["exchange_transport_note"] = self.ex.transport_note
        out.update({"peer_rows": self.peer_rows, "served_for_peers": self.served_for_peers,
                    "coalesced_requests": self.coalesced,
                    "owner_requests": self.cache.counters.requests,
                    "owner_distinct": self.cache.counters.distinct})
        return out

    def close(self) -> None:
        try:
            self.ex.close()
        finally:
            self.cache.close()

    def memory(self) -> dict:
        """The owner's memory, on each of the G devices."""
        return for_devices(self.cache.memory(), self.world_size)

