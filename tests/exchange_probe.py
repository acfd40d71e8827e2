"""A rank worker for tests/test_train_exchange.py: the training worker with every fetch's split kept
(the fetch's wall time and the stages the loader made of it), written to `args["out"]/<rank>.json`."""

import json
import os


def recording_splits(cfg, rank, world_size, hb, args):
    from lsm_gnn.ranks.workers import train_worker
    from lsm_gnn.train import loader

    split, kept = loader.fetch_split, []

    def recorded(source, seconds, before, after):
        stages = split(source, seconds, before, after)
        kept.append({"seconds": seconds, "stages": stages})
        return stages

    loader.fetch_split = recorded   # the loader looks it up per fetch
    out = train_worker(cfg, rank, world_size, hb, {})
    with open(os.path.join(args["out"], f"{rank}.json"), "w") as f:
        json.dump(kept, f)
    return out
