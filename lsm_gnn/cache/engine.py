"""The CPU cache engine: the set-associative cache of one owner as flat arrays + numba kernels.

State (one entry per slot = set * ways + way): key (-1 empty), PageRank byte, reuse tag, LRU
stamp, SIEVE visited bit and list links; per set: fill count, round-robin counter, SIEVE head /
tail / hand. A 16-byte record per owner-local row ``v // G`` (window.ROW_*: slot or -1, dedupe
position, landing-buffer position, window mask) makes every lookup O(1) on the CPU and touches one
cache line per id; the decisions are the same as a 32-way tag scan (the GPU engine's way).

One iteration = `step(batch)` then `end_iteration()`; `replay(flat, offsets)` runs a whole trace
inside one kernel. The semantics are in docs/cache-semantics.md; the pure-Python reference
(lsm_gnn.cache.reference) makes the same decisions and the tests hold the two together.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from lsm_gnn.cache.memhint import PREFETCH_DISTANCE, prefetch_record
from lsm_gnn.cache.geometry import cache_geometry, check_owner_args, local_rows
from lsm_gnn.cache.policies import KERNEL_CODES, LRU, SIEVE, get_policy, resolve_policy
from lsm_gnn.cache.policies import choose_victim as _choose
from lsm_gnn.cache.victim import LandingBuffer, VictimQueues, prefetch_queue
from lsm_gnn.cache.window import (FRESH, MASK_WINDOW_MAX, NO_REUSE, TAG_DTYPE, ROW_DPOS, ROW_FIELDS, ROW_LAND,
                                  ROW_MASK, ROW_SLOT, first_reuse, mask_update, refresh_tags, retag_fresh,
                                  retag_pending, retag_rows)
from lsm_gnn.utils.errors import InputError

# status of a distinct id in a step
HIT, VICTIM_HIT, STORAGE = 0, 1, 2
# spill outcome of an eviction
NOT_SPILLED, SPILL_DROPPED = -1, -2
# per-step counts (index into StepResult.counts / replay rows)
COUNT_NAMES = ("requests", "distinct", "hits", "victim_hits", "storage_rows", "evictions",
               "spills", "spill_dropped", "prefetched")


@njit(cache=True, nogil=True)
def step_kernel(batch, t, G, sets, ways, code, window, pvp, depth, st, static,
                q_ids, q_count, land_ids, land_n, leave, retag, pending, distinct, inverse, status,
                slot, src, evicted, spill, spill_slot, spill_dst, counts):
    """Serve one batch's decisions: dedupe, lookup all, then misses in first-occurrence order.

    With `leave` (incremental tags), batch t's bit is cleared from the window masks in the same
    pass, and with `retag` its resident lines are retagged there too (window.first_reuse ignores
    bit t, so this equals doing it before the batch). With a non-empty `pending` (tags refreshed
    every iteration), each filled line also gets the tag it will have at the next refresh before
    the batch t+1+W enters (window.first_reuse at t+1 of its current mask), so that refresh
    needs no second look at the row.
    """
    (keys, pagerank, tag, stamp, visited, newer, older, set_fill, rr, head, tail, hand,
     rows, dirty, in_dirty, dirty_n) = st
    n = len(batch)
    now = t + 1
    keep = 0xFFFFFFFF ^ (np.int64(1) << np.int64(t % 32))
    nland = land_n[0]
    nd = 0
    hits = vhits = storage = 0
    # 1+2. dedupe (distinct ids in order of first occurrence) and look each distinct id up
    # against the cache state at the start of the batch. A row's DPOS / LAND fields are valid
    # only if they point back at it (sparse-set check), so they never need clearing.
    for i in range(n):
        if i + PREFETCH_DISTANCE < n:
            prefetch_record(rows, batch[i + PREFETCH_DISTANCE] // G)
        v = batch[i]
        r = rows[v // G]
        m = r[ROW_MASK]
        if leave:
            m = np.int32(np.int64(m) & keep)
            r[ROW_MASK] = m
        p = r[ROW_DPOS]
        if p >= 0 and p < nd and distinct[p] == v:
            inverse[i] = p
            continue
        r[ROW_DPOS] = nd
        distinct[nd] = v
        inverse[i] = nd
        evicted[nd] = -1
        spill[nd] = NOT_SPILLED
        s = r[ROW_SLOT]
        lp = r[ROW_LAND]
        if s >= 0:
            if retag:
                tag[s] = first_reuse(m, t)
            status[nd] = HIT
            slot[nd] = s
            src[nd] = -1
            if code == LRU:
                stamp[s] = now
            elif code == SIEVE:
                visited[s] = 1
            hits += 1
        elif lp >= 0 and lp < nland and land_ids[lp] == v:
            status[nd] = VICTIM_HIT
            src[nd] = lp
            vhits += 1
        else:
            status[nd] = STORAGE
            src[nd] = -1
            storage += 1
        nd += 1
    # 3. misses (victim hits and storage reads alike) fill lines, in first-occurrence order
    nev = nsp = ndrop = 0
    for d in range(nd):
        if d + PREFETCH_DISTANCE < nd:
            prefetch_record(rows, distinct[d + PREFETCH_DISTANCE] // G)
        if status[d] == HIT:
            continue
        v = distinct[d]
        loc = v // G
        si = loc % sets
        base = si * ways
        f = set_fill[si]
        if f < ways:
            w = f
            set_fill[si] = f + 1
        else:
            w = _choose(code, base, ways, t, window, pagerank, tag, stamp, rr, si,
                        visited, newer, tail, hand)
            sl = base + w
            ev = keys[sl]
            evicted[d] = ev
            nev += 1
            rows[ev // G, ROW_SLOT] = -1
            if pvp:
                te = tag[sl]
                if te != NO_REUSE and te != FRESH and te > t:
                    q = te % window
                    c = q_count[q]
                    if c < depth:
                        dst = q * depth + c
                        q_ids[dst] = ev
                        q_count[q] = c + 1
                        spill_slot[nsp] = sl
                        spill_dst[nsp] = dst
                        spill[d] = q
                        nsp += 1
                    else:
                        spill[d] = SPILL_DROPPED
                        ndrop += 1
            if code == SIEVE:
                nw, ow = newer[sl], older[sl]
                if nw >= 0:
                    older[base + nw] = ow
                else:
                    head[si] = ow
                if ow >= 0:
                    newer[base + ow] = nw
                else:
                    tail[si] = nw
        sl = base + w
        keys[sl] = v
        r = rows[loc]
        r[ROW_SLOT] = sl
        if len(pending):
            pending[sl] = first_reuse(r[ROW_MASK], t + 1)
        pagerank[sl] = static[v]
        tag[sl] = FRESH
        if in_dirty[sl] == 0:
            in_dirty[sl] = 1
            dirty[dirty_n[0]] = sl
            dirty_n[0] += 1
        if code == LRU:
            stamp[sl] = now
        elif code == SIEVE:
            visited[sl] = 0
            older[sl] = head[si]
            newer[sl] = -1
            if head[si] >= 0:
                newer[base + head[si]] = w
            else:
                tail[si] = w
            head[si] = w
        slot[d] = sl
    counts[0] = n
    counts[1] = nd
    counts[2] = hits
    counts[3] = vhits
    counts[4] = storage
    counts[5] = nev
    counts[6] = nsp
    counts[7] = ndrop
    counts[8] = 0
    return nd, nsp


@njit(cache=True, nogil=True)
def replay_kernel(flat, offsets, G, sets, ways, code, window, refresh_every, pvp, depth, st,
                  static, q_ids, q_count, land_ids, land_n, out):
    """Run every batch of a trace: refresh, step, prefetch; one row of counts per batch.

    With a window of at most MASK_WINDOW_MAX batches the tags are maintained incrementally
    (window.first_reuse); otherwise every refresh rescans the window. Both give the tags of
    docs/cache-semantics.md.
    """
    nb = len(offsets) - 1
    maxb = 0
    for b in range(nb):
        maxb = max(maxb, offsets[b + 1] - offsets[b])
    distinct = np.empty(maxb, np.int64)
    inverse = np.empty(maxb, np.int64)
    status = np.empty(maxb, np.int8)
    slot = np.empty(maxb, np.int64)
    src = np.empty(maxb, np.int64)
    evicted = np.empty(maxb, np.int64)
    spill = np.empty(maxb, np.int64)
    spill_slot = np.empty(maxb, np.int64)
    spill_dst = np.empty(maxb, np.int64)
    keys, tag, rows = st[0], st[2], st[12]
    dirty, in_dirty, dirty_n = st[13], st[14], st[15]
    incremental = window <= MASK_WINDOW_MAX
    every = incremental and refresh_every == 1
    pending = np.empty(len(keys) if every else 0, np.int32)
    if incremental:
        for b in range(1, min(window, nb - 1) + 1):
            mask_update(flat[offsets[b]: offsets[b + 1]], b, G, rows, True, False, 0, tag)
    last_refresh = -1
    for t in range(nb):
        due = t % refresh_every == 0
        # every iteration batch t leaves the horizon and batch t+W enters it; when a refresh is
        # due one iteration after the last, those are the only rows whose tag can change, so
        # they are retagged in the same pass
        fused = due and t >= 1 and last_refresh == t - 1
        if fused and every:
            # lines filled in t-1 take the tag step_kernel prepared; batch t+W then retags its own
            retag_pending(pending, tag, dirty, in_dirty, dirty_n)
        if incremental and t >= 1:
            # batch t leaves inside step_kernel (leave=True), after this one enters
            if window > 0 and t + window < nb:
                e = t + window
                mask_update(flat[offsets[e]: offsets[e + 1]], e, G, rows, True, fused, t, tag)
        if due:
            if incremental:
                if not fused:
                    for t2 in range(last_refresh + 1, t + 1):
                        if t2 == 0:
                            for b in range(1, min(window, nb - 1) + 1):
                                retag_rows(flat[offsets[b]: offsets[b + 1]], t, G, rows, tag)
                        else:
                            if t2 < t:  # batch t itself is retagged inside step_kernel
                                retag_rows(flat[offsets[t2]: offsets[t2 + 1]], t, G, rows, tag)
                            if window > 0 and t2 + window < nb:
                                e = t2 + window
                                retag_rows(flat[offsets[e]: offsets[e + 1]], t, G, rows, tag)
                retag_fresh(t, G, keys, rows, tag, dirty, in_dirty, dirty_n)
                last_refresh = t
            else:
                e = min(t + 1 + window, nb)
                lo = offsets[min(t + 1, nb)]
                refresh_tags(t, flat[lo: offsets[e]], offsets[min(t + 1, nb): e + 1] - lo, G,
                             rows, tag, dirty, in_dirty, dirty_n)
        step_kernel(flat[offsets[t]: offsets[t + 1]], t, G, sets, ways, code, window, pvp, depth,
                    st, static, q_ids, q_count, land_ids, land_n, incremental and t >= 1,
                    incremental and due, pending, distinct, inverse, status, slot, src, evicted,
                    spill, spill_slot, spill_dst, out[t])
        if pvp:
            prefetch_queue(t, window, depth, G, q_ids, q_count, land_ids, land_n, rows)
            out[t, 8] = land_n[0]


@dataclass
class StepResult:
    """Decisions of one step, as views of the engine's scratch arrays (valid until the next step).

    Per distinct id d (order of first occurrence): status[d] (HIT / VICTIM_HIT / STORAGE);
    slot[d] the cache slot that served (hit) or was filled (miss); src[d] the landing-buffer
    position (victim hits); evicted[d] the key the fill evicted (-1: none); spill[d] the victim
    queue it went to (NOT_SPILLED, SPILL_DROPPED). Per request i: inverse[i] = its distinct index.
    Spill records: the line in cache slot spill_slot[k] goes to victim-queue row spill_dst[k].
    """

    distinct: np.ndarray
    inverse: np.ndarray
    status: np.ndarray
    slot: np.ndarray
    src: np.ndarray
    evicted: np.ndarray
    spill: np.ndarray
    spill_slot: np.ndarray
    spill_dst: np.ndarray
    counts: dict


def configure_engine(engine, capacity_rows, num_rows, static_scores, ways, policy, window, refresh_every,
                     pvp, victim_depth, num_owners, owner, *, kind: str, max_ways: int | None = None):
    """Validate and set the settings both engines share; returns the static scores (uint8, host)."""
    check_owner_args(num_rows, num_owners, owner)
    if refresh_every < 1:
        raise InputError(f"refresh_every must be at least 1, found {refresh_every}")
    if window < 0 or victim_depth < 1:
        raise InputError(f"window must be >= 0 and victim_depth >= 1, found {window}, {victim_depth}")
    engine.geometry = cache_geometry(capacity_rows, ways)
    if max_ways is not None and engine.geometry.ways > max_ways:
        raise InputError(f"the {kind} engine supports at most {max_ways} ways, found {engine.geometry.ways}")
    engine.num_rows, engine.num_owners, engine.owner = int(num_rows), int(num_owners), int(owner)
    engine.window, engine.refresh_every = int(window), int(refresh_every)
    engine.pvp = bool(pvp) and engine.window > 0
    engine.policy_name = resolve_policy(policy, engine.pvp)
    engine.code = get_policy(engine.policy_name).code
    if engine.code not in KERNEL_CODES:
        raise InputError(f"policy {engine.policy_name!r} has no {kind} kernel (reference engine only)")
    scores = np.ascontiguousarray(static_scores, dtype=np.uint8)
    if scores.shape != (engine.num_rows,):
        raise InputError(f"static_scores: expected shape ({engine.num_rows},), found {scores.shape}")
    engine.depth = int(victim_depth)
    return scores


class CpuCacheEngine:
    """Decisions of one owner's cache (no feature data: see fetcher.CachedFeatureSource)."""

    def __init__(self, capacity_rows: int, num_rows: int, static_scores: np.ndarray, *, ways: int = 32,
                 policy: str = "hybrid", window: int = 8, refresh_every: int = 1, pvp: bool = True,
                 victim_depth: int = 32768, num_owners: int = 1, owner: int = 0,
                 victims: VictimQueues | None = None, landing: LandingBuffer | None = None):
        self.static = configure_engine(self, capacity_rows, num_rows, static_scores, ways, policy, window,
                                       refresh_every, pvp, victim_depth, num_owners, owner, kind="CPU")
        self.victims = victims or VictimQueues(self.window, self.depth)
        self.landing = landing or LandingBuffer(self.depth)
        if self.victims.depth != self.depth or len(self.landing.ids) != self.depth:
            raise InputError("victim queues and landing buffer must have victim_depth lines")
        self.t = 0
        self._alloc_state()
        self._scratch_size = 0
        self._no_pending = np.zeros(0, np.int32)

    def _alloc_state(self) -> None:
        g = self.geometry
        lines, sets, nloc = g.lines, g.sets, local_rows(self.num_rows, self.num_owners)
        self.keys = np.full(lines, -1, np.int64)
        self.pagerank = np.zeros(lines, np.uint8)
        self.tag = np.full(lines, NO_REUSE, TAG_DTYPE)
        self.stamp = np.zeros(lines, np.int64)
        self.visited = np.zeros(lines, np.uint8)
        self.newer = np.full(lines, -1, np.int32)
        self.older = np.full(lines, -1, np.int32)
        self.set_fill = np.zeros(sets, np.int32)
        self.rr = np.zeros(sets, np.int64)
        self.head = np.full(sets, -1, np.int32)
        self.tail = np.full(sets, -1, np.int32)
        self.hand = np.full(sets, -1, np.int32)
        if lines >= 2**31:
            raise InputError(f"at most 2**31 - 1 cache lines per owner, found {lines}")
        self.rows = np.full((nloc, ROW_FIELDS), -1, np.int32)
        self.rows[:, 3] = 0  # ROW_MASK: no window batch requests anything yet
        self.dirty = np.zeros(lines, np.int64)
        self.in_dirty = np.zeros(lines, np.uint8)
        self.dirty_n = np.zeros(1, np.int64)
        self._state = (self.keys, self.pagerank, self.tag, self.stamp, self.visited, self.newer,
                       self.older, self.set_fill, self.rr, self.head, self.tail, self.hand,
                       self.rows, self.dirty, self.in_dirty, self.dirty_n)

    def _ensure_scratch(self, n: int) -> None:
        if n <= self._scratch_size:
            return
        size = max(n, 2 * self._scratch_size, 1024)
        self._distinct = np.empty(size, np.int64)
        self._inverse = np.empty(size, np.int64)
        self._status = np.empty(size, np.int8)
        self._slot = np.empty(size, np.int64)
        self._src = np.empty(size, np.int64)
        self._evicted = np.empty(size, np.int64)
        self._spill = np.empty(size, np.int64)
        self._spill_slot = np.empty(size, np.int64)
        self._spill_dst = np.empty(size, np.int64)
        self._counts = np.zeros(len(COUNT_NAMES), np.int64)
        self._scratch_size = size

    # ---- one iteration ------------------------------------------------------------------------
    def refresh_due(self) -> bool:
        return self.t % self.refresh_every == 0

    def step(self, batch: np.ndarray, window_ids: np.ndarray | None = None,
             window_offsets: np.ndarray | None = None) -> StepResult:
        """Iteration self.t: refresh tags (if due) from the window, then serve `batch`.

        `batch` and the window are owned, in-range int64 ids (callers validate with
        geometry.check_owned_ids); window batch k is window_ids[window_offsets[k]:window_offsets[k+1]].
        """
        batch = np.ascontiguousarray(batch, dtype=np.int64)
        if self.refresh_due():
            if window_ids is None:
                window_ids, window_offsets = np.zeros(0, np.int64), np.zeros(1, np.int64)
            refresh_tags(self.t, window_ids, window_offsets[: self.window + 1], self.num_owners,
                         self.rows, self.tag, self.dirty, self.in_dirty, self.dirty_n)
        self._ensure_scratch(max(len(batch), 1))
        nd, nsp = step_kernel(batch, self.t, self.num_owners, self.geometry.sets, self.geometry.ways,
                              self.code, self.window, self.pvp, self.depth, self._state, self.static,
                              self.victims.ids, self.victims.count, self.landing.ids, self.landing.n,
                              False, False, self._no_pending, self._distinct, self._inverse,
                              self._status, self._slot, self._src, self._evicted, self._spill,
                              self._spill_slot, self._spill_dst, self._counts)
        return StepResult(self._distinct[:nd], self._inverse[: len(batch)], self._status[:nd],
                          self._slot[:nd], self._src[:nd], self._evicted[:nd], self._spill[:nd],
                          self._spill_slot[:nsp], self._spill_dst[:nsp],
                          dict(zip(COUNT_NAMES, self._counts.tolist())))

    def end_iteration(self) -> int:
        """PVP: move queue (t+1) % W into the landing buffer; returns that queue (-1: PVP off)."""
        q = -1
        if self.pvp:
            q = int(prefetch_queue(self.t, self.window, self.depth, self.num_owners, self.victims.ids,
                                   self.victims.count, self.landing.ids, self.landing.n, self.rows))
        self.t += 1
        return q

    # ---- a whole trace ------------------------------------------------------------------------
    def replay(self, flat: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        """Run batches flat[offsets[b]:offsets[b+1]] from the current state; one row of
        COUNT_NAMES counts per batch (prefetched: lines moved to the landing buffer at its end)."""
        offsets = np.ascontiguousarray(offsets, dtype=np.int64)
        nb = len(offsets) - 1
        out = np.zeros((nb, len(COUNT_NAMES)), np.int64)
        if self.t != 0:
            raise InputError("replay starts from a fresh engine (t = 0)")
        replay_kernel(np.ascontiguousarray(flat, dtype=np.int64), offsets, self.num_owners,
                      self.geometry.sets, self.geometry.ways, self.code, self.window, self.refresh_every,
                      self.pvp, self.depth, self._state, self.static, self.victims.ids,
                      self.victims.count, self.landing.ids, self.landing.n, out)
        self.t = nb
        return out

    # ---- inspection (tests, stats) ------------------------------------------------------------
    def resident_keys(self) -> np.ndarray:
        return self.keys[self.keys >= 0]

    def occupancy(self) -> int:
        return int(self.set_fill.sum())
