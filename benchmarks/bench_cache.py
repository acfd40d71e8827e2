"""asv benchmarks of the CPU cache engine (decision replay, no feature data moved)."""

try:
    from lsm_gnn.bench.cache import POLICY_NAMES, synthetic_trace
except ModuleNotFoundError:  # a commit before lsm_gnn/bench/ (asv runs this suite against older builds)
    from lsm_gnn.cache.bench import POLICY_NAMES, synthetic_trace
from lsm_gnn.cache.budget import memory_budget
from lsm_gnn.cache.replay import replay
from lsm_gnn.config import CacheConfig

from ._timing import Timed

ROWS, BATCHES, BATCH_SIZE = 200_000, 30, 20_000


class CacheReplay(Timed):
    params = [list(POLICY_NAMES)]  # every configurable policy of the registry, hybrid first
    param_names = ["policy"]

    def setup(self, policy):
        self.batches, self.static = synthetic_trace(ROWS, BATCHES, BATCH_SIZE, seed=0)
        self.cfg = CacheConfig(policy=policy, window=8, capacity_fraction=0.1)  # total budget, as every run
        self.budget = memory_budget(self.cfg, ROWS, 1)
        self.requests = sum(len(b) for b in self.batches)
        replay(self.batches[:2], self.cfg, ROWS, self.static, budget=self.budget)  # compile

    def time_replay(self, policy):
        replay(self.batches, self.cfg, ROWS, self.static, budget=self.budget)

    def track_storage_rows(self, policy):
        """A count of a deterministic replay: equal on every run unless behaviour changed."""
        return replay(self.batches, self.cfg, ROWS, self.static, budget=self.budget).totals["storage_rows"]

    track_storage_rows.unit = "rows"
    track_storage_rows.repeat = 1
    track_storage_rows.rounds = 1
