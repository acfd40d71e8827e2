"""asv benchmarks of the training pipeline: sampling one mini-batch, and one train step of each
model on it (CPU). The graph (20k nodes, 128-dim features) is generated once by `setup_cache`.
For LSM-GNN against the in-memory ideal, run `lsm-gnn bench train DATASET`.
"""

import os

import numpy as np

os.environ.setdefault("DGLBACKEND", "pytorch")

from ._timing import Timed  # noqa: E402

N, DIM = 20000, 128


def _build(root):
    from lsm_gnn.datasets.format import DatasetWriter

    rng = np.random.default_rng(0)
    src, dst = rng.integers(0, N, 6 * N), rng.integers(0, N, 6 * N)
    with DatasetWriter(root, "asv-train", overwrite=True) as w:
        w.add_node_type("paper", N)
        w.add_edges("paper", "cites", "paper", np.r_[src, dst], np.r_[dst, src])
        labels = rng.integers(0, 19, N)
        with w.feature_file(DIM, "float32") as f:
            f.write(rng.normal(size=(N, DIM)).astype(np.float32))
        w.set_labels("paper", labels, 19)
        perm = rng.permutation(N)
        w.set_splits(np.sort(perm[: N // 2]), perm[N // 2: N // 2 + 10], perm[-10:])
        w.add_static_scores()
        w.commit()


class SampleBatch(Timed):
    params = (["10,15", "10,5,5"],)
    param_names = ["fanouts"]

    def setup_cache(self):
        root = os.path.abspath("lsm-gnn-asv-train")
        _build(root)
        return root

    def setup(self, root, fanouts):
        from lsm_gnn.datasets.format import Dataset
        from lsm_gnn.sampling import NeighborSampler

        self.sampler = NeighborSampler(Dataset(root), [int(f) for f in fanouts.split(",")], 1024)
        self.seeds = self.sampler.epoch_seeds(0)[:1024]
        self.sampler.sample(self.seeds)            # compile the kernels outside the timing

    def time_sample(self, root, fanouts):
        self.sampler.sample(self.seeds, key_parts=(1,))


class TrainStep(Timed):
    params = (["sage", "gat"],)
    param_names = ["model"]

    def setup_cache(self):
        root = os.path.abspath("lsm-gnn-asv-train")
        _build(root)
        return root

    def setup(self, root, model):
        import torch

        from lsm_gnn.config import ModelConfig
        from lsm_gnn.datasets.format import Dataset
        from lsm_gnn.models import build_model
        from lsm_gnn.sampling import NeighborSampler

        ds = Dataset(root)
        mb = next(NeighborSampler(ds, [10, 15], 1024).epoch(0))
        self.blocks, self.y = mb.blocks, torch.from_numpy(mb.labels)
        self.x = torch.from_numpy(np.asarray(ds.feature_array())[mb.input_nodes])
        self.model = build_model(ModelConfig(name=model, hidden=128), ds, 2)
        self.opt = torch.optim.Adam(self.model.parameters())

    def time_train_step(self, root, model):
        import torch.nn.functional as F

        self.opt.zero_grad()
        F.cross_entropy(self.model(self.blocks, self.x), self.y).backward()
        self.opt.step()
