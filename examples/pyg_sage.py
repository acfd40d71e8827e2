"""A stock torch_geometric GraphSAGE trained on mini-batches whose features come through LSM-GNN's
cache, behind a PyG FeatureStore.

    .venv/bin/lsm-gnn dataset generate tiny              # once: data/synthetic-tiny
    .venv/bin/python examples/pyg_sage.py                # the cache (10 % of the feature bytes)
    .venv/bin/python examples/pyg_sage.py --features memory            # the in-memory ideal

Any key of the run config can be set: `--set cache.policy=horizon --set cache.window=16`.
Prints the loss every 10 iterations, then the loader's stats; `--record run.json` writes the run
record (the schema of `lsm-gnn train`). See docs/integrations.md.
"""

import argparse

import torch
import torch.nn.functional as F
from torch_geometric.nn import GraphSAGE

from lsm_gnn.config import load_config
from lsm_gnn.datasets.format import Dataset
from lsm_gnn.sources.factory import make_feature_source
from lsm_gnn.integrations.pyg import LsmFeatureStore, LsmSampler, PyGLoader


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dataset", nargs="?", default="data/synthetic-tiny")
    ap.add_argument("--features", choices=["cache", "memory"], default="cache")
    ap.add_argument("--iters", type=int, default=20, help="iterations per epoch (0: the whole epoch)")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--fanouts", default="10,15")
    ap.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--record", help="write the run record here")
    args = ap.parse_args()

    fanouts = [int(f) for f in args.fanouts.split(",")]
    over = [f"dataset.path={args.dataset}", f"sampler.batch_size={args.batch_size}", f"sampler.fanouts={fanouts}"]
    if args.features == "memory":
        over += ["cache.enabled=false", "storage.reader=memory"]
    cfg = load_config(None, over + args.sets)
    dataset = Dataset(cfg.dataset.path)

    store = LsmFeatureStore(make_feature_source(cfg, dataset), dataset)   # x: the source, y: the labels
    loader = PyGLoader(store, LsmSampler(dataset, fanouts, seed=cfg.train.seed), cfg=cfg,
                       max_iters=args.iters or None)

    torch.manual_seed(cfg.train.seed)
    model = GraphSAGE(dataset.features().dim, cfg.model.hidden, num_layers=len(fanouts),
                      out_channels=dataset.num_classes)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.train.lr)
    for epoch in range(args.epochs):
        for step, batch in enumerate(loader):
            out = model(batch.x, batch.edge_index)[:batch.batch_size]
            loss = F.cross_entropy(out, batch.y[:batch.batch_size])
            opt.zero_grad()
            loss.backward()
            opt.step()
            loader.log_loss(loss.item())
            if step % 10 == 0:
                print(f"epoch {epoch} step {step:4d} loss {loss.item():.4f}")

    m = loader.record(args.record)["metrics"]
    print(f"hit rates {({k: round(v, 3) for k, v in m['hit_rate'].items()})}")
    print(f"per iteration: {1e3 * m['time']['per_iteration_wall']:.1f} ms, waiting for inputs "
          f"{1e3 * m['time']['per_iteration_wait']:.1f} ms; storage read {m['traffic']['storage_bytes']:,} B")
    store.close()


if __name__ == "__main__":
    main()
