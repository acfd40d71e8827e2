"""asv: the simulator's bounds on a synthetic zipf trace (200 batches x 20k requests over 200k rows).

MIN should cost no more than a few policy replays (the cache engine's target is 5M requests/s/core).
"""

import numpy as np

from lsm_gnn.sim.bounds import RequestSequence, belady_min, optimal_static

from ._timing import Timed


class BoundsSuite(Timed):
    def setup(self):
        rng = np.random.default_rng(0)
        self.num_rows = 200_000
        batches = [rng.zipf(1.2, 20_000) % self.num_rows for _ in range(200)]
        self.seq = RequestSequence.from_batches(batches, self.num_rows)
        self.capacity = self.num_rows // 10
        belady_min(self.seq, 10)  # compile outside the timed region

    def time_coalesce(self):
        RequestSequence.from_batches([self.seq.ids], self.num_rows)

    def time_belady_min(self):
        belady_min(self.seq, self.capacity)

    def time_optimal_static(self):
        optimal_static(self.seq, self.capacity)
