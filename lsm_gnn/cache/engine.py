"""The CPU cache engine: the set-associative cache of one owner as flat arrays + numba kernels.

State (one entry per slot = set * ways + way): key (-1 empty), PageRank byte, reuse tag; per
set: fill count; and the state arrays the policy declares (lsm_gnn.cache.policies: the LRU stamp,
SIEVE's visited bits, list links and hand, the round-robin counter), which the engine passes to
the policy's hooks without knowing what they are. A 16-byte record per owner-local row ``v // G``
(window.ROW_*: slot or -1, dedupe position, landing-buffer position, window mask) makes every
lookup O(1) on the CPU and touches one cache line per id; the decisions are the same as a 32-way
tag scan (the GPU engine's way). A long-lookahead policy (horizon) also keeps its lookahead ring
(window.LookaheadRing).

One iteration = `step(batch)` then `end_iteration()`; `replay(flat, offsets)` runs a whole trace
inside one kernel. The semantics are in docs/cache-semantics.md; the pure-Python reference
(lsm_gnn.cache.reference) makes the same decisions and the tests hold the two together.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from lsm_gnn.cache.memhint import PREFETCH_DISTANCE, prefetch_record
from lsm_gnn.cache.geometry import cache_geometry, check_owner_args
from lsm_gnn.cache.policies import STATE_ORDER, get_policy, lookahead_horizon, resolve_policy, state_arrays
from lsm_gnn.cache.policies import kernels as hooks
from lsm_gnn.cache.victim import LandingBuffer, VictimQueues, prefetch_queue
from lsm_gnn.cache.window import (FRESH, MASK_WINDOW_MAX, NO_REUSE, TAG_DTYPE, ROW_DPOS, ROW_FIELDS, ROW_LAND,
                                  ROW_MASK, ROW_SLOT, LookaheadRing, batch_records, first_reuse, ingest, mask_update,
                                  refresh_tags, retag_fresh, retag_pending, retag_rows, ring_capacity)
from lsm_gnn.ownership import local_row, local_row_of_id, local_rows
from lsm_gnn.utils.errors import InputError, StateError

# status of a distinct id in a step
HIT, VICTIM_HIT, STORAGE = 0, 1, 2
# spill outcome of an eviction
NOT_SPILLED, SPILL_DROPPED = -1, -2
# per-step counts (index into StepResult.counts / replay rows)
COUNT_NAMES = ("requests", "distinct", "hits", "victim_hits", "storage_rows", "evictions",
               "spills", "spill_dropped", "prefetched", "bypassed")
# step_kernel's nd when the batch served is not the one the lookahead ring announced
RING_MISMATCH = -1
# step_kernel's nd when a set's state is corrupt: the way to fill is outside the set (a negative
# fill count, or a policy hook's -1: a SIEVE list that leaves the set); the GPU engine's cache_fill
# makes the same check and both raise StateError (`corrupt_state`)
CORRUPT_STATE = -2


def corrupt_state(t: int, where: str) -> StateError:
    """The error both engines raise when a step finds a set's policy state corrupt."""
    return StateError(f"iteration {t}: the cache state of {where} is corrupt (the way to fill is outside the "
                      "set: a negative fill count or a policy list that leaves the set); this engine's state "
                      "is no longer valid")


@njit(cache=True, forceinline=True, _nrt=False)
def filled_in_batch(v, G, rows, distinct, status, nd):
    """Was the resident line of v filled during this batch (v is one of its misses)?"""
    p = rows[local_row_of_id(v, G), ROW_DPOS]
    return p >= 0 and p < nd and distinct[p] == v and status[p] != HIT


@njit(cache=True, nogil=True)
def step_kernel(batch, t, G, sets, ways, policies, code, window, pvp, depth, st, ps, static,
                q_ids, q_count, land_ids, land_n, leave, retag, pending, ring, K, distinct, inverse, status,
                slot, src, evicted, spill, spill_slot, spill_dst, nextuse, counts):
    """Serve one batch's decisions: dedupe, lookup all, then misses in first-occurrence order.

    With `leave` (incremental tags), batch t's bit is cleared from the window masks in the same
    pass, and with `retag` its resident lines are retagged there too (window.first_reuse ignores
    bit t, so this equals doing it before the batch). With a non-empty `pending` (tags refreshed
    every iteration), each filled line also gets the tag it will have at the next refresh before
    the batch t+1+W enters (window.first_reuse at t+1 of its current mask), so that refresh
    needs no second look at the row. `policies` is the registry's token (policies.kernels: the
    hooks are a chain over the registry, by `code`) and the policy's state `ps` goes to its hooks.
    A long-lookahead policy (trait `long_lookahead`) reads each id's next use from the lookahead
    ring (batch t ingested, ids checked against it: RING_MISMATCH otherwise), retags its hits and
    tags its fills at once; a policy with `admission` may refuse a miss (slot -1, `bypassed`).
    """
    keys, pagerank, tag, set_fill, rows, dirty, in_dirty, dirty_n = st
    n = len(batch)
    now = t + 1
    keep = 0xFFFFFFFF ^ (np.int64(1) << np.int64(t % 32))
    nland = land_n[0]
    nd = 0
    hits = vhits = storage = 0
    long_la = hooks.long_lookahead(policies, code)  # the policy's traits
    admits = hooks.admission(policies, code)
    r_row, r_next, r_base, r_last, r_meta = ring
    cap = len(r_row)
    rec0 = rec_n = np.int64(0)
    if long_la:
        rec0, rec_n = batch_records(ring, t, K)
    # 1+2. dedupe (distinct ids in order of first occurrence) and look each distinct id up
    # against the cache state at the start of the batch. A row's DPOS / LAND fields are valid
    # only if they point back at it (sparse-set check), so they never need clearing.
    for i in range(n):
        if i + PREFETCH_DISTANCE < n:
            prefetch_record(rows, local_row_of_id(batch[i + PREFETCH_DISTANCE], G))
        v = batch[i]
        r = rows[local_row_of_id(v, G)]
        m = r[ROW_MASK]
        if leave:
            m = np.int32(np.int64(m) & keep)
            r[ROW_MASK] = m
        p = r[ROW_DPOS]
        if p >= 0 and p < nd and distinct[p] == v:
            inverse[i] = p
            continue
        if long_la:
            rec = (rec0 + nd) % cap
            if nd >= rec_n or r_row[rec] != local_row_of_id(v, G):
                return RING_MISMATCH, 0
            nextuse[nd] = r_next[rec]
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
            if long_la:
                tag[s] = nextuse[nd]
            status[nd] = HIT
            slot[nd] = s
            src[nd] = -1
            hooks.on_hit(policies, code, ps, s, now)
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
    if long_la:
        if nd != rec_n:
            return RING_MISMATCH, 0
        r_meta[1] = rec0 + rec_n  # batch t's records are consumed
    # 3. misses (victim hits and storage reads alike) fill lines, in first-occurrence order
    nev = nsp = ndrop = nbyp = 0
    for d in range(nd):
        if d + PREFETCH_DISTANCE < nd:
            prefetch_record(rows, local_row_of_id(distinct[d + PREFETCH_DISTANCE], G))
        if status[d] == HIT:
            continue
        v = distinct[d]
        loc = local_row_of_id(v, G)
        si = loc % sets
        base = si * ways
        f = set_fill[si]
        if f < ways:
            w = f
            set_fill[si] = f + 1
        else:
            w = hooks.choose_victim(policies, code, ps, si, base, ways, t, window, pagerank, tag)
        if w < 0 or w >= ways:  # never touch another set's lines (cuda/cache_fill.cu: the same check)
            return CORRUPT_STATE, si
        if f >= ways:
            sl = base + w
            in_tag = nextuse[d] if long_la else FRESH
            if admits and not hooks.admit(policies, code, ps, in_tag, static[v], sl, t, pagerank, tag):
                slot[d] = -1  # not cached: served from the read buffer, nothing evicted
                nbyp += 1
                continue
            ev = keys[sl]
            evicted[d] = ev
            nev += 1
            rows[local_row_of_id(ev, G), ROW_SLOT] = -1
            if pvp:
                te = tag[sl]
                # spilled: a known reuse still ahead, within the W queues' reach, of a line that
                # was resident when the batch began (a line filled in this batch has no row yet)
                if te != NO_REUSE and te != FRESH and te > t and te <= t + window and \
                        not filled_in_batch(ev, G, rows, distinct, status, nd):
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
            hooks.on_evict(policies, code, ps, sl, si, base)
        sl = base + w
        keys[sl] = v
        r = rows[loc]
        r[ROW_SLOT] = sl
        pagerank[sl] = static[v]
        if long_la:
            tag[sl] = nextuse[d]
        else:
            if len(pending):
                pending[sl] = first_reuse(r[ROW_MASK], t + 1)
            tag[sl] = FRESH
            if in_dirty[sl] == 0:
                in_dirty[sl] = 1
                dirty[dirty_n[0]] = sl
                dirty_n[0] += 1
        hooks.on_fill(policies, code, ps, sl, si, base, w, now)
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
    counts[9] = nbyp
    return nd, nsp


@njit(cache=True, nogil=True)
def replay_kernel(flat, offsets, G, sets, ways, policies, code, window, refresh_every, pvp, depth, st, ps,
                  static, q_ids, q_count, land_ids, land_n, ring, K, out):
    """Run every batch of a trace: refresh, step, prefetch; one row of counts per batch.

    With a window of at most MASK_WINDOW_MAX batches the tags are maintained incrementally
    (window.first_reuse); otherwise every refresh rescans the window. A long-lookahead policy
    instead feeds batch t+K into its lookahead ring before serving batch t. All give the tags of
    docs/cache-semantics.md. Returns (-1, -1), or (t, set) of the first step that found a set's
    state corrupt (CORRUPT_STATE: the replay stops there).
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
    keys, tag, rows = st[0], st[2], st[4]
    dirty, in_dirty, dirty_n = st[5], st[6], st[7]
    if hooks.long_lookahead(policies, code):
        nextuse = np.empty(maxb, np.int32)
        meta = ring[4]
        for t in range(nb):
            while meta[0] <= min(t + K, nb - 1):
                e = meta[0]
                ingest(flat[offsets[e]: offsets[e + 1]], e, G, K, ring, rows, tag)
            batch = flat[offsets[t]: offsets[t + 1]]
            no_pending = nextuse[:0]
            nd, bad = step_kernel(batch, t, G, sets, ways, policies, code, window, pvp, depth, st, ps, static, q_ids,
                                  q_count, land_ids, land_n, False, False, no_pending, ring, K, distinct, inverse,
                                  status, slot, src, evicted, spill, spill_slot, spill_dst, nextuse, out[t])
            if nd == CORRUPT_STATE:
                return t, bad
            if pvp:
                prefetch_queue(t, window, depth, G, q_ids, q_count, land_ids, land_n, rows)
                out[t, 8] = land_n[0]
        return -1, -1
    nextuse = np.empty(0, np.int32)
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
        leave = incremental and t >= 1
        retag = incremental and due
        batch = flat[offsets[t]: offsets[t + 1]]
        nd, bad = step_kernel(batch, t, G, sets, ways, policies, code, window, pvp, depth, st, ps, static, q_ids,
                              q_count, land_ids, land_n, leave, retag, pending, ring, K, distinct, inverse, status,
                              slot, src, evicted, spill, spill_slot, spill_dst, nextuse, out[t])
        if nd == CORRUPT_STATE:
            return t, bad
        if pvp:
            prefetch_queue(t, window, depth, G, q_ids, q_count, land_ids, land_n, rows)
            out[t, 8] = land_n[0]
    return -1, -1


@dataclass
class StepResult:
    """Decisions of one step, as views of the engine's scratch arrays (valid until the next step).

    Per distinct id d (order of first occurrence): status[d] (HIT / VICTIM_HIT / STORAGE);
    slot[d] the cache slot that served (hit) or was filled (miss), -1 for a miss the policy did
    not admit (served from the read buffer, nothing cached: counts["bypassed"]); src[d] the
    landing-buffer position (victim hits); evicted[d] the key the fill evicted (-1: none);
    spill[d] the victim queue it went to (NOT_SPILLED, SPILL_DROPPED). Per request i: inverse[i]
    = its distinct index. Spill records: the line in cache slot spill_slot[k] goes to
    victim-queue row spill_dst[k].
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
                     pvp, victim_depth, num_owners, owner, lookahead, *, kind: str, max_ways: int | None = None):
    """Validate and set the settings both engines share; returns the static scores (uint8, host).

    The settings come from the config through `lsm_gnn.cache.engines.engine_settings` (the
    engines have no defaults of their own). `lookahead`: K, the future batches a long-lookahead
    policy reads (cache.lookahead); the engine's `lookahead` is the number of window batches
    `step` reads (K, or W for the others).
    """
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
    spec = get_policy(engine.policy_name)
    engine.code = spec.code
    if not spec.kernels:
        raise InputError(f"policy {engine.policy_name!r} has no {kind} kernel (reference engine only)")
    engine.long_lookahead = bool(spec.long_lookahead)
    engine.lookahead = lookahead_horizon(policy=engine.policy_name, window=engine.window, lookahead=lookahead)
    if engine.long_lookahead and engine.lookahead < 1:
        raise InputError(f"policy {engine.policy_name!r} needs a lookahead of at least 1 batch, found {lookahead}")
    scores = np.ascontiguousarray(static_scores, dtype=np.uint8)
    if scores.shape != (engine.num_rows,):
        raise InputError(f"static_scores: expected shape ({engine.num_rows},), found {scores.shape}")
    engine.depth = int(victim_depth)
    return scores


class CpuCacheEngine:
    """Decisions of one owner's cache (no feature data: see lsm_gnn.sources.cached.CachedFeatureSource)."""

    def __init__(self, capacity_rows: int, num_rows: int, static_scores: np.ndarray, *, ways: int, policy: str,
                 window: int, refresh_every: int, pvp: bool, victim_depth: int, lookahead: int,
                 num_owners: int = 1, owner: int = 0, victims: VictimQueues | None = None,
                 landing: LandingBuffer | None = None):
        self.static = configure_engine(self, capacity_rows, num_rows, static_scores, ways, policy, window,
                                       refresh_every, pvp, victim_depth, num_owners, owner, lookahead, kind="CPU")
        hooks.check_kernels(self.policy_name)
        self.policies = hooks.table()  # the registry as the kernels see it (dispatch by self.code)
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
        if lines >= 2**31:
            raise InputError(f"at most 2**31 - 1 cache lines per owner, found {lines}")
        self.keys = np.full(lines, -1, np.int64)
        self.pagerank = np.zeros(lines, np.uint8)
        self.tag = np.full(lines, NO_REUSE, TAG_DTYPE)
        self.set_fill = np.zeros(sets, np.int32)
        # the policy's own state (the built-in stamp, visited, newer, older, rr, head, tail, hand,
        # then every registered policy's slots: empty unless the policy keeps it), as one tuple for
        # the kernels in the layout of the token they get, the built-in arrays as attributes too
        self.policy_state = state_arrays(self.policy_name, lines, sets, classes=hooks.table_classes(self.policies))
        for name in STATE_ORDER:
            setattr(self, name, self.policy_state[name])
        self._ps = tuple(self.policy_state.values())
        self.rows = np.full((nloc, ROW_FIELDS), -1, np.int32)
        self.rows[:, ROW_MASK] = 0  # no window batch requests anything yet
        self.dirty = np.zeros(lines, np.int64)
        self.in_dirty = np.zeros(lines, np.uint8)
        self.dirty_n = np.zeros(1, np.int64)
        self._state = (self.keys, self.pagerank, self.tag, self.set_fill, self.rows, self.dirty, self.in_dirty,
                       self.dirty_n)
        self.ring = LookaheadRing(self.lookahead if self.long_lookahead else 0, nloc if self.long_lookahead else 0,
                                  capacity=1024 if self.long_lookahead else 1)

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
        self._nextuse = np.empty(size if self.long_lookahead else 0, np.int32)
        self._counts = np.zeros(len(COUNT_NAMES), np.int64)
        self._scratch_size = size

    # ---- one iteration ------------------------------------------------------------------------
    def refresh_due(self) -> bool:
        return self.t % self.refresh_every == 0

    def step(self, batch: np.ndarray, window_ids: np.ndarray | None = None,
             window_offsets: np.ndarray | None = None) -> StepResult:
        """Iteration self.t: refresh tags (if due) from the window, then serve `batch`.

        `batch` and the window are owned, in-range int64 ids (callers validate with
        geometry.check_owned_ids); window batch k is window_ids[window_offsets[k]:window_offsets[k+1]],
        the batch of iteration t+1+k; batches past `self.lookahead` are ignored. A long-lookahead
        policy reads only the batches it has not seen (its window must extend the previous
        step's: the same batches, possibly more; docs/cache-semantics.md §2).
        """
        batch = np.ascontiguousarray(batch, dtype=np.int64)
        if window_ids is None:
            window_ids, window_offsets = np.zeros(0, np.int64), np.zeros(1, np.int64)
        if self.long_lookahead:
            self._ingest(batch, window_ids, window_offsets)
        elif self.refresh_due():
            refresh_tags(self.t, window_ids, window_offsets[: self.window + 1], self.num_owners,
                         self.rows, self.tag, self.dirty, self.in_dirty, self.dirty_n)
        self._ensure_scratch(max(len(batch), 1))
        nd, nsp = step_kernel(batch, self.t, self.num_owners, self.geometry.sets, self.geometry.ways,
                              self.policies, self.code, self.window, self.pvp, self.depth, self._state, self._ps,
                              self.static, self.victims.ids, self.victims.count, self.landing.ids, self.landing.n,
                              False, False, self._no_pending, self.ring.arrays, self.ring.K, self._distinct,
                              self._inverse, self._status, self._slot, self._src, self._evicted, self._spill,
                              self._spill_slot, self._spill_dst, self._nextuse, self._counts)
        if nd == RING_MISMATCH:
            raise InputError(f"iteration {self.t}: the batch served is not the batch the lookahead announced "
                             "(the window of each step must hold the batches that follow, in order); this "
                             "engine's state is no longer valid")
        if nd == CORRUPT_STATE:
            raise corrupt_state(self.t, f"set {nsp}")
        return StepResult(self._distinct[:nd], self._inverse[: len(batch)], self._status[:nd],
                          self._slot[:nd], self._src[:nd], self._evicted[:nd], self._spill[:nd],
                          self._spill_slot[:nsp], self._spill_dst[:nsp],
                          dict(zip(COUNT_NAMES, self._counts.tolist())))

    def _ingest(self, batch, window_ids, window_offsets) -> None:
        """Feed the lookahead ring the batches it has not seen: batch t itself (if no earlier
        window announced it), then the window batches past the last one ingested."""
        ring, t, K = self.ring, self.t, self.ring.K
        offs = np.asarray(window_offsets, np.int64)[: K + 1]
        first = int(ring.meta[0])
        todo = []
        if first <= t:
            todo.append((t, batch))
        for k in range(len(offs) - 1):
            e = t + 1 + k
            if e >= max(first, t + 1):
                todo.append((e, window_ids[offs[k]: offs[k + 1]]))
        if not todo:
            return
        ring.ensure(sum(len(ids) for _, ids in todo))
        for e, ids in todo:
            ingest(np.ascontiguousarray(ids, dtype=np.int64), e, self.num_owners, K, ring.arrays, self.rows,
                   self.tag)

    def storage_misses(self, batch: np.ndarray) -> np.ndarray:
        """The distinct ids (sorted) that `step(batch)` would read from storage if it ran now:
        neither resident nor in the landing buffer (step_kernel's lookup, without its side
        effects). The fetcher's read-ahead asks this for batch t+1 after step t's end_iteration;
        nothing before step t+1 changes the answer (advance only retags)."""
        ids = np.unique(np.asarray(batch, dtype=np.int64))
        rec = self.rows[local_row(ids, self.num_owners)]
        miss = rec[:, ROW_SLOT] < 0
        n = int(self.landing.n[0]) if self.pvp else 0
        if n:
            land = rec[:, ROW_LAND]
            miss &= ~((land >= 0) & (land < n) & (self.landing.ids[np.clip(land, 0, n - 1)] == ids))
        return ids[miss]

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
        if self.long_lookahead:
            self.ring.ensure(ring_capacity(offsets, self.ring.K))
        bad_t, bad_set = replay_kernel(
            np.ascontiguousarray(flat, dtype=np.int64), offsets, self.num_owners, self.geometry.sets,
            self.geometry.ways, self.policies, self.code, self.window, self.refresh_every, self.pvp, self.depth,
            self._state, self._ps, self.static, self.victims.ids, self.victims.count, self.landing.ids,
            self.landing.n, self.ring.arrays, self.ring.K, out)
        if bad_t >= 0:
            self.t = int(bad_t)
            raise corrupt_state(int(bad_t), f"set {bad_set}")
        self.t = nb
        return out

    # ---- inspection (tests, stats) ------------------------------------------------------------
    def resident_keys(self) -> np.ndarray:
        return self.keys[self.keys >= 0]

    def occupancy(self) -> int:
        return int(self.set_fill.sum())

    def lookahead_bytes(self) -> int:
        """Host bytes of the lookahead state this engine keeps (the ring of a long-lookahead
        policy; 0 otherwise: the W-batch window masks live in the 16-byte row records)."""
        return self.ring.nbytes if self.long_lookahead else 0
