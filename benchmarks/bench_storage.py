"""asv benchmarks of the feature-store readers: one random batch of rows per call, and one
sequential batch (consecutive rows) into a page-aligned or an unaligned output buffer (the direct
reader reads the aligned case straight into it, the unaligned one through its staging buffer).

The file (16k rows of 4 KiB, 64 MB) is built once by `setup_cache`, in the working directory asv
gives it (asv's own cache directory, removed after the run).
For the ratios against the raw device (fio), run `lsm-gnn bench storage DATASET`.
"""

import os

import numpy as np

from lsm_gnn.datasets.format import Dataset, DatasetWriter
from lsm_gnn.storage import open_feature_store
from lsm_gnn.storage.base import aligned_empty
from lsm_gnn.storage.pagecache import drop_file_cache

from ._timing import Timed

ROWS, DIM = 16384, 1024


def _build(root):
    rng = np.random.default_rng(0)
    with DatasetWriter(root, "asv-storage", overwrite=True) as w:
        w.add_node_type("paper", ROWS)
        w.add_edges("paper", "cites", "paper", np.array([0]), np.array([1]))
        with w.feature_file(DIM, "float32") as f:
            for s in range(0, ROWS, 4096):
                f.write(rng.random((4096, DIM), dtype=np.float32))
        w.set_labels("paper", np.zeros(ROWS, np.int64), 2)
        w.set_splits(np.arange(0, 1), np.arange(1, 2), np.arange(2, 3))
        w.add_static_scores()
        w.commit()


class ReadRows(Timed):
    params = (["direct", "mmap", "memory"], [4096])
    param_names = ["reader", "batch_size"]

    def setup_cache(self):
        root = os.path.abspath("lsm-gnn-asv-storage")
        _build(root)
        return root

    def setup(self, root, reader, batch_size):
        self.store = open_feature_store(Dataset(root), reader)
        self.ids = np.random.default_rng(1).integers(0, ROWS, batch_size)
        self.out = np.empty((batch_size, DIM), np.float32)
        self.store.read_rows(self.ids[:8])  # compiled code and threads ready
        if reader != "memory":
            drop_file_cache(self.store.path)

    def teardown(self, root, reader, batch_size):
        self.store.close()

    def time_read_rows(self, root, reader, batch_size):
        self.store.read_rows(self.ids, out=self.out)

    def track_read_amplification(self, root, reader, batch_size):
        self.store.counters.reset()
        self.store.read_rows(self.ids, out=self.out)
        return self.store.counters.read_amplification

    track_read_amplification.unit = "storage bytes per useful byte"
    track_read_amplification.repeat = 1
    track_read_amplification.rounds = 1


class ReadSequential(Timed):
    params = (["direct"], ["aligned", "unaligned"])
    param_names = ["reader", "out"]

    def setup_cache(self):
        root = os.path.abspath("lsm-gnn-asv-storage-seq")
        _build(root)
        return root

    def setup(self, root, reader, out):
        self.store = open_feature_store(Dataset(root), reader)
        self.ids = np.arange(4096, 8192)
        self.out = aligned_empty((4096, DIM), np.float32)
        if out == "unaligned":  # the same buffer shifted by 64 bytes
            self.out = aligned_empty((4096 * DIM + 16,), np.float32)[16:16 + 4096 * DIM].reshape(4096, DIM)
        self.store.read_rows(self.ids[:8])
        drop_file_cache(self.store.path)

    def teardown(self, root, reader, out):
        self.store.close()

    def time_read_rows(self, root, reader, out):
        self.store.read_rows(self.ids, out=self.out)
