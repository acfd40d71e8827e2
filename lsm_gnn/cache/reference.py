"""The reference cache engine: slow, plain Python, written to be obviously right.

It follows docs/cache-semantics.md step by step with lists and dicts (a set is a list of `ways`
lines; lookups scan the set; every decision is the policy plug-in's hook: on_hit, victim, admit,
on_evict, on_fill), and returns the same decisions as the CPU engine's `StepResult`, as Python
lists. Tags are refreshed literally from the window given to `step` (a long-lookahead policy
reads K batches every iteration). The tests hold every engine to it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from lsm_gnn.cache.engine import COUNT_NAMES, HIT, NOT_SPILLED, SPILL_DROPPED, STORAGE, VICTIM_HIT
from lsm_gnn.cache.geometry import cache_geometry, check_owner_args
from lsm_gnn.cache.policies import LineView, get_policy, lookahead_horizon, resolve_policy
from lsm_gnn.cache.window import FRESH, NO_REUSE
from lsm_gnn.ownership import local_row_of_id

# the owner rule's own Python function (the pure-Python engine calls no compiled code)
_local_row = local_row_of_id.py_func


@dataclass
class Line:
    key: int
    pagerank: int
    tag: int


@dataclass
class ReferenceStep:
    distinct: list[int]
    inverse: list[int]
    status: list[int]
    slot: list[int]
    src: list[int]
    evicted: list[int]
    spill: list[int]
    counts: dict
    bypassed: int = 0


class ReferenceCache:
    def __init__(self, capacity_rows: int, num_rows: int, static_scores: np.ndarray, *, ways: int, policy: str,
                 window: int, refresh_every: int, pvp: bool, victim_depth: int, lookahead: int,
                 num_owners: int = 1, owner: int = 0):
        check_owner_args(num_rows, num_owners, owner)
        geo = cache_geometry(capacity_rows, ways)
        self.num_sets, self.ways = geo.sets, geo.ways
        self.num_owners = num_owners
        self.window, self.refresh_every, self.depth = window, refresh_every, victim_depth
        self.pvp = pvp and window > 0
        self.policy = get_policy(resolve_policy(policy, self.pvp))
        # window batches the tags read: K for a long-lookahead policy (refreshed every iteration,
        # fills tagged at once), else W
        self.lookahead = lookahead_horizon(policy=self.policy.name, window=window, lookahead=lookahead)
        self.long_lookahead = self.policy.long_lookahead
        self.static = [int(x) for x in static_scores]
        self.sets: list[list[Line | None]] = [[None] * self.ways for _ in range(self.num_sets)]
        self.policy_state = [self.policy.new_set_state(self.ways) for _ in range(self.num_sets)]
        self.queues: list[list[int]] = [[] for _ in range(window)]
        self.landing: list[int] = []
        self.t = 0

    def set_of(self, v: int) -> int:
        return _local_row(v, self.num_owners) % self.num_sets

    def find(self, v: int) -> int | None:
        for way, line in enumerate(self.sets[self.set_of(v)]):
            if line is not None and line.key == v:
                return way
        return None

    def refresh(self, window_batches: Sequence[Sequence[int]]) -> None:
        for lines in self.sets:
            for line in lines:
                if line is not None:
                    line.tag = NO_REUSE
        for k, batch in enumerate(list(window_batches)[: self.lookahead]):
            for v in batch:
                way = self.find(int(v))
                if way is not None:
                    line = self.sets[self.set_of(int(v))][way]
                    line.tag = min(line.tag, self.t + 1 + k)

    def step(self, batch: Sequence[int], window_batches: Sequence[Sequence[int]] = ()) -> ReferenceStep:
        t = self.t
        window_batches = [[int(v) for v in b] for b in list(window_batches)[: self.lookahead]]
        if self.long_lookahead or t % self.refresh_every == 0:
            self.refresh(window_batches)
        batch = [int(v) for v in batch]
        position: dict[int, int] = {}
        for v in batch:
            position.setdefault(v, len(position))
        distinct = list(position)
        rec = ReferenceStep(distinct, [position[v] for v in batch], [], [], [], [], [], {})
        # lookup every distinct id first
        for v in distinct:
            way = self.find(v)
            if way is not None:
                rec.status.append(HIT)
                rec.slot.append(self.set_of(v) * self.ways + way)
                rec.src.append(-1)
                self.policy.on_hit(self.policy_state[self.set_of(v)], way, t)
            elif v in self.landing:
                rec.status.append(VICTIM_HIT)
                rec.slot.append(-1)
                rec.src.append(self.landing.index(v))
            else:
                rec.status.append(STORAGE)
                rec.slot.append(-1)
                rec.src.append(-1)
            rec.evicted.append(-1)
            rec.spill.append(NOT_SPILLED)
        # then the misses, in order of first occurrence
        filled: set[int] = set()  # ids whose line was filled in this batch (never spilled: no row yet)
        for d, v in enumerate(distinct):
            if rec.status[d] == HIT:
                continue
            s = self.set_of(v)
            lines = self.sets[s]
            # a long-lookahead policy knows the filled row's next request at once
            tag = FRESH
            if self.long_lookahead:
                tag = next((t + 1 + k for k, b in enumerate(window_batches) if v in b), NO_REUSE)
            empty = [w for w, line in enumerate(lines) if line is None]
            if empty:
                way = empty[0]
            else:
                views = [LineView(line.key, line.pagerank, line.tag) for line in lines]
                way = self.policy.victim(self.policy_state[s], views, t, self.window)
                if not self.policy.admit(self.policy_state[s], views, way, LineView(v, self.static[v], tag), t):
                    rec.slot[d] = -1  # not cached: served from the read buffer, nothing evicted
                    rec.bypassed += 1
                    continue
                old = lines[way]
                rec.evicted[d] = old.key
                # spilled: a known reuse still ahead and within the W queues' reach
                if self.pvp and old.tag not in (NO_REUSE, FRESH) and t < old.tag <= t + self.window \
                        and old.key not in filled:
                    q = old.tag % self.window
                    if len(self.queues[q]) < self.depth:
                        self.queues[q].append(old.key)
                        rec.spill[d] = q
                    else:
                        rec.spill[d] = SPILL_DROPPED
                self.policy.on_evict(self.policy_state[s], way)
            lines[way] = Line(v, self.static[v], tag)
            filled.add(v)
            self.policy.on_fill(self.policy_state[s], way, t)
            rec.slot[d] = s * self.ways + way
        rec.counts = {
            "requests": len(batch), "distinct": len(distinct),
            "hits": rec.status.count(HIT), "victim_hits": rec.status.count(VICTIM_HIT),
            "storage_rows": rec.status.count(STORAGE),
            "evictions": sum(e >= 0 for e in rec.evicted),
            "spills": sum(q >= 0 for q in rec.spill), "spill_dropped": rec.spill.count(SPILL_DROPPED),
            "prefetched": 0, "bypassed": rec.bypassed,
        }
        return rec

    def end_iteration(self) -> int:
        q = -1
        if self.pvp:
            q = (self.t + 1) % self.window
            self.landing, self.queues[q] = self.queues[q], []
        self.t += 1
        return q

    def replay(self, batches: Sequence[Sequence[int]]) -> np.ndarray:
        rows = []
        for t, batch in enumerate(batches):
            rec = self.step(batch, batches[t + 1: t + 1 + max(self.window, self.lookahead)])
            self.end_iteration()
            rec.counts["prefetched"] = len(self.landing) if self.pvp else 0
            rows.append([rec.counts[k] for k in COUNT_NAMES])
        return np.array(rows, dtype=np.int64).reshape(len(rows), len(COUNT_NAMES))

    def resident_keys(self) -> list[int]:
        return [line.key for lines in self.sets for line in lines if line is not None]

    def slot_keys(self) -> list[int]:
        return [-1 if line is None else line.key for lines in self.sets for line in lines]

    def slot_tags(self) -> list[int]:
        return [int(NO_REUSE) if line is None else int(line.tag) for lines in self.sets for line in lines]
