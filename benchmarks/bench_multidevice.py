"""asv: the shared cache's request routing on the CPU engine: owner split and reorder of one
mini-batch's input ids (150k ids, the paper's 1024 x 10 x 15) for G = 2 and 4."""

import numpy as np

from lsm_gnn.ownership import reorder, split_by_owner

from ._timing import Timed


class OwnerRoutingSuite(Timed):
    params = [2, 4]
    param_names = ["devices"]

    def setup(self, devices):
        rng = np.random.default_rng(0)
        self.ids = rng.integers(0, 10_000_000, 153_600)
        self.split = split_by_owner(self.ids, devices)  # compile outside the timed region
        self.rows = np.zeros((len(self.ids), 128), dtype=np.float32)

    def time_split(self, devices):
        split_by_owner(self.ids, devices)

    def time_reorder_128d(self, devices):
        reorder(self.rows, self.split.positions)
