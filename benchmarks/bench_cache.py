"""asv benchmarks of the CPU cache engine (decision replay, no feature data moved)."""

import time

import numpy as np

from lsm_gnn.cache.bench import synthetic_trace
from lsm_gnn.cache.budget import memory_budget
from lsm_gnn.cache.replay import replay
from lsm_gnn.config import CacheConfig

ROWS, BATCHES, BATCH_SIZE = 200_000, 30, 20_000


class CacheReplay:
    params = [["hybrid", "static", "dynamic", "lru", "sieve", "round_robin"]]
    param_names = ["policy"]
    timeout = 120

    def setup(self, policy):
        self.batches, self.static = synthetic_trace(ROWS, BATCHES, BATCH_SIZE, seed=0)
        self.cfg = CacheConfig(policy=policy, window=8, capacity_fraction=0.1)  # total budget, as every run
        self.budget = memory_budget(self.cfg, ROWS, 1)
        self.requests = sum(len(b) for b in self.batches)
        replay(self.batches[:2], self.cfg, ROWS, self.static, budget=self.budget)  # compile

    def time_replay(self, policy):
        replay(self.batches, self.cfg, ROWS, self.static, budget=self.budget)

    def track_requests_per_s_per_core(self, policy):
        t0 = time.thread_time()
        replay(self.batches, self.cfg, ROWS, self.static, budget=self.budget)
        return self.requests / (time.thread_time() - t0)

    track_requests_per_s_per_core.unit = "requests/s"
