"""The shared-cache feature source of one rank (and its isolated-mode counterpart).

Shared mode (LSM-GNN): rank r owns the rows v with v % G == r. Its local cache (a
`CachedFeatureSource` over its own owner file) serves only those rows, for every rank. Per
iteration, `fetch(ids)` splits the ids by owner, exchanges counts then ids, serves the ids it
received through the local cache (one call, so the same row asked by two ranks is read once),
sends the rows back and reorders them into the requester's order.

`advance(window)` announces this rank's next W batches to their owners, W batches ahead, so each
owner's cache sees the future requests of *every* rank (reuse tags and the victim-buffer
prefetcher need them). Only batches the owners have not seen yet travel: a rank compares the new
window with the one it announced before (shifted by the fetches since) and sends a per-owner
header `[shift, kept, new, counts...]` plus the new batches' ids. The decision is local and the
header carries it, so the ranks never have to agree on it in advance.

Isolated mode (the multi-GPU GIDS baseline): each rank has a plain cache over the whole feature
file and caches what it requests; nothing is exchanged.
"""

from __future__ import annotations

import time
from typing import Sequence

import numpy as np

from lsm_gnn.multidevice.exchange import Exchange
from lsm_gnn.multidevice.health import NULL_HEARTBEAT, FaultInjector, Heartbeat
from lsm_gnn.multidevice.owners import as_ids, reorder, split_by_owner
from lsm_gnn.features import OutputRows, TierCounters
from lsm_gnn.utils.errors import InputError

HEADER = 3  # shift, kept, new


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a is b or (a.shape == b.shape and np.array_equal(a, b))


class SharedCacheFeatureSource:
    """FeatureSource of rank `rank` in shared mode; `owner_cache` serves the rows this rank owns."""

    def __init__(self, owner_cache, exchange: Exchange, *, num_rows: int, row_dim: int, dtype,
                 max_window: int, heartbeat: Heartbeat = NULL_HEARTBEAT, fault: FaultInjector | None = None):
        self.cache = owner_cache
        self.ex = exchange
        self.rank, self.world_size = exchange.rank, exchange.world_size
        self.num_rows, self.row_dim, self.dtype = num_rows, row_dim, np.dtype(dtype)
        self.max_window = max_window
        self.heartbeat = heartbeat
        self.fault = fault or FaultInjector(self.rank)
        self.counters = TierCounters()
        self._out = None            # reused output arrays (features.OutputRows)
        self.peer_rows = 0          # rows this rank received from other owners
        self.served_for_peers = 0   # rows this rank's cache served to other ranks
        self.coalesced = 0          # requests served by another request's row in the same fetch
        self.times = {"split": 0.0, "exchange_ids": 0.0, "serve": 0.0, "exchange_rows": 0.0,
                      "reorder": 0.0, "window": 0.0}
        self._announced: list[np.ndarray] = []              # my future batches, as announced
        self._future: list[list[np.ndarray]] = [[] for _ in range(self.world_size)]  # owner view
        self._fetches_since_advance = 0
        self.iterations = 0

    # ---- lookahead ------------------------------------------------------------------------------
    def advance(self, window: Sequence[np.ndarray]) -> None:
        t0 = time.perf_counter()
        self.heartbeat.beat()
        window = [as_ids(w, self.num_rows, "window batch") for w in window]
        if len(window) > self.max_window:
            raise InputError(f"advance: window of {len(window)} batches exceeds the configured "
                             f"cache.window={self.max_window}")
        G = self.world_size
        shift = self._fetches_since_advance
        candidates = self._announced[shift:]
        kept = 0
        while kept < min(len(candidates), len(window)) and _same(window[kept], candidates[kept]):
            kept += 1
        new = window[kept:]
        splits = [split_by_owner(b, G) for b in new]
        header = np.zeros((G, HEADER + self.max_window), dtype=np.int64)
        header[:, 0], header[:, 1], header[:, 2] = shift, kept, len(new)
        for j, s in enumerate(splits):
            header[:, HEADER + j] = s.counts
        send_counts = header[:, HEADER:].sum(axis=1)
        # ids to owner o: the o-bucket of every new batch, batch after batch
        send = np.concatenate([s.bucket(o) for o in range(G) for s in splits]) if splits else np.zeros(0, np.int64)
        recv_header = self.ex.headers(header)
        recv = self.ex.ids(send, send_counts, recv_header[:, HEADER:].sum(axis=1))
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
        self.cache.advance(owner_window)
        self.times["window"] += time.perf_counter() - t0

    # ---- one iteration ----------------------------------------------------------------------------
    def fetch(self, ids: np.ndarray) -> np.ndarray:
        self.fault.tick()
        self.heartbeat.beat()
        t0 = time.perf_counter()
        ids = as_ids(ids, self.num_rows)
        split = split_by_owner(ids, self.world_size)
        t1 = time.perf_counter()
        recv_counts = self.ex.headers(split.counts[:, None])[:, 0]
        recv_ids = self.ex.ids(split.send_ids, split.counts, recv_counts)
        t2 = time.perf_counter()
        if recv_ids.size and np.any(recv_ids % self.world_size != self.rank):
            raise InputError(f"rank {self.rank} received ids it does not own")
        served = self._serve(recv_ids, recv_counts)
        t3 = time.perf_counter()
        rows = self.ex.rows(served, recv_counts, split.counts)
        t4 = time.perf_counter()
        if self._out is None:
            self._out = OutputRows(self.row_dim, rows.dtype)
        out = reorder(rows, split.positions, out=self._out.get(len(rows)))
        t5 = time.perf_counter()
        self.counters.requests += len(ids)
        self.counters.distinct += len(np.unique(ids))
        self.peer_rows += int(split.counts.sum() - split.counts[self.rank])
        self.served_for_peers += int(recv_counts.sum() - recv_counts[self.rank])
        for k, dt in (("split", t1 - t0), ("exchange_ids", t2 - t1), ("serve", t3 - t2),
                      ("exchange_rows", t4 - t3), ("reorder", t5 - t4)):
            self.times[k] += dt
        self._fetches_since_advance += 1
        self.iterations += 1
        return out

    def _serve(self, recv_ids: np.ndarray, recv_counts: np.ndarray) -> np.ndarray:
        before = self.cache.counters.as_dict()
        served = np.asarray(self.cache.fetch(recv_ids))
        if served.shape != (len(recv_ids), self.row_dim):
            raise InputError(f"owner cache of rank {self.rank} returned {served.shape} rows for "
                             f"{len(recv_ids)} ids")
        after = self.cache.counters.as_dict()
        hits = after["local_hits"] - before["local_hits"]
        # The owner's cache hits split into rows asked by this rank (local) and by peers: exact
        # when the cache reports per-row tiers, else attributed to the owner as local hits.
        tiers = getattr(self.cache, "last_tiers", None)
        if tiers is not None and len(tiers) == len(recv_ids):
            own = np.zeros(len(recv_ids), dtype=bool)
            off = np.concatenate([[0], np.cumsum(recv_counts)])
            own[off[self.rank]: off[self.rank + 1]] = True
            hit = np.asarray(tiers) == 0
            self.counters.local_hits += int((hit & own).sum())
            self.counters.peer_hits += int((hit & ~own).sum())
        else:
            self.counters.local_hits += hits
        self.counters.victim_hits += after["victim_hits"] - before["victim_hits"]
        self.counters.storage_rows += after["storage_rows"] - before["storage_rows"]
        self.coalesced += len(recv_ids) - (after["distinct"] - before["distinct"])
        return served.astype(self.dtype, copy=False)

    # ---- reporting ----------------------------------------------------------------------------------
    @property
    def stats(self) -> dict:
        out = dict(getattr(self.cache, "stats", {}) or {})
        out.update({f"{k}_s": v for k, v in self.times.items()})
        out.update({f"exchange_{k}": v for k, v in self.ex.stats.as_dict().items()})
        out.update({"peer_rows": self.peer_rows, "served_for_peers": self.served_for_peers,
                    "coalesced_requests": self.coalesced,
                    "owner_requests": self.cache.counters.requests,
                    "owner_distinct": self.cache.counters.distinct})
        return out

    def close(self) -> None:
        close = getattr(self.cache, "close", None)
        if close is not None:
            close()


class IsolatedFeatureSource:
    """Isolated mode: a rank's own cache over the whole file (no exchange), with the same
    heartbeat and fault hooks as the shared source so both modes run under one harness."""

    def __init__(self, cache, rank: int, *, heartbeat: Heartbeat = NULL_HEARTBEAT,
                 fault: FaultInjector | None = None):
        self.cache, self.rank, self.heartbeat = cache, rank, heartbeat
        self.fault = fault or FaultInjector(rank)
        self.counters = cache.counters

    def advance(self, window) -> None:
        self.heartbeat.beat()
        self.cache.advance(window)

    def fetch(self, ids):
        self.fault.tick()
        self.heartbeat.beat()
        return self.cache.fetch(ids)

    @property
    def stats(self) -> dict:
        return dict(getattr(self.cache, "stats", {}) or {})

    def close(self) -> None:
        close = getattr(self.cache, "close", None)
        if close is not None:
            close()
