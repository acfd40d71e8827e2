"""A rank worker for tests/test_multidevice_launch.py: what the rank's environment says about threads."""

import os

from lsm_gnn.utils.threads import THREAD_VARS


def report(cfg, rank, world_size, hb, args):
    import torch

    return {"env": {k: os.environ.get(k) for k in THREAD_VARS}, "torch": torch.get_num_threads()}
