"""A rank worker for tests/test_train_sync.py: the training worker with one rank's data plane slowed
(a peer that samples or fetches slower), so that the other rank waits for it at the gradient sync."""

import time


def slow_peer(cfg, rank, world_size, hb, args):
    from lsm_gnn.ranks.workers import train_worker
    from lsm_gnn.train import loop

    if rank == int(args["slow_rank"]):
        epoch = loop.FeatureLoader.epoch

        def slow_epoch(self, e):
            for batch in epoch(self, e):
                time.sleep(float(args["extra_s"]))
                yield batch

        loop.FeatureLoader.epoch = slow_epoch
    return train_worker(cfg, rank, world_size, hb, {})
