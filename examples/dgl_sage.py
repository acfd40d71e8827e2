"""A stock DGL GraphSAGE trained through LSM-GNN's cache: GIDS's training loop, lsm-gnn's loader.

    .venv/bin/lsm-gnn dataset generate tiny              # once: data/synthetic-tiny
    .venv/bin/python examples/dgl_sage.py                # the cache (10 % of the feature bytes)
    .venv/bin/python examples/dgl_sage.py --features memory            # the in-memory ideal
    .venv/bin/torchrun --nproc_per_node 2 examples/dgl_sage.py         # 2 ranks, one shared cache

Any key of the run config can be set: `--set cache.policy=horizon --set storage.reader=mmap`.
Prints the loss every 10 iterations, then the loader's stats; `--record run.json` writes the run
record (the schema of `lsm-gnn train`). See docs/integrations.md.
"""

import argparse
import os

os.environ.setdefault("DGLBACKEND", "pytorch")

import dgl  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from lsm_gnn.config import load_config  # noqa: E402
from lsm_gnn.datasets.format import Dataset  # noqa: E402
from lsm_gnn.sources.factory import make_feature_source  # noqa: E402
from lsm_gnn.integrations.dgl import DGLDataLoader  # noqa: E402
from lsm_gnn.multidevice.group import init_process_group  # noqa: E402
from lsm_gnn.sampling import NeighborSampler  # noqa: E402


class SAGE(torch.nn.Module):
    """GraphSAGE as in DGL's examples: dgl.nn.SAGEConv layers over the sampled blocks."""

    def __init__(self, in_dim, hidden, classes, layers=2):
        super().__init__()
        dims = [in_dim] + [hidden] * (layers - 1) + [classes]
        self.layers = torch.nn.ModuleList(dgl.nn.SAGEConv(a, b, "mean") for a, b in zip(dims, dims[1:]))

    def forward(self, blocks, x):
        for i, (layer, block) in enumerate(zip(self.layers, blocks)):
            x = layer(block, x)
            if i < len(self.layers) - 1:
                x = F.relu(x)
        return x


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dataset", nargs="?", default="data/synthetic-tiny")
    ap.add_argument("--features", choices=["cache", "memory"], default="cache")
    ap.add_argument("--sampler", choices=["dgl", "lsm"], default="dgl",
                    help="dgl.dataloading.NeighborSampler, or lsm-gnn's (reproducible batches)")
    ap.add_argument("--iters", type=int, default=20, help="iterations per epoch (0: the whole epoch)")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--fanouts", default="10,15")
    ap.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--record", help="write the run record here")
    args = ap.parse_args()

    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    fanouts = [int(f) for f in args.fanouts.split(",")]
    over = {"dataset.path": args.dataset, "sampler.batch_size": args.batch_size, "sampler.fanouts": fanouts}
    if args.features == "memory":
        over.update({"cache.enabled": False, "storage.reader": "memory"})
    if world > 1:
        over.update({"distributed.devices": world, "distributed.mode": "shared"})
    cfg = load_config(None, [f"{k}={v}" for k, v in over.items()] + args.sets)
    if world > 1:   # torchrun's environment; gloo on the CPU, NCCL with train.device=cuda
        init_process_group(cfg.distributed, cfg.train.device, rank, world)

    dataset = Dataset(cfg.dataset.path)
    source = make_feature_source(cfg, dataset, rank, world)   # the cache, the shared cache, the ideal, ...
    sampler = dgl.dataloading.NeighborSampler(fanouts) if args.sampler == "dgl" else \
        NeighborSampler(dataset, fanouts, args.batch_size)
    loader = DGLDataLoader(dataset, dataset.split("train"), sampler, source, cfg=cfg, max_iters=args.iters or None)

    torch.manual_seed(cfg.train.seed)
    model = SAGE(dataset.features().dim, cfg.model.hidden, dataset.num_classes, len(fanouts))
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.train.lr)
    for epoch in range(args.epochs):
        for step, (input_nodes, seeds, blocks, x) in enumerate(loader):
            y = blocks[-1].dstdata["label"]
            loss = F.cross_entropy(model(blocks, x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            loader.log_loss(loss.item())
            if step % 10 == 0 and rank == 0:
                print(f"epoch {epoch} step {step:4d} loss {loss.item():.4f}")

    stats = loader.stats()
    rec = loader.record(args.record)    # every rank calls it (it gathers the ranks' figures)
    if rank == 0:
        t = stats["time"]
        print(f"hit rates {({k: round(v, 3) for k, v in rec['metrics']['hit_rate'].items()})}")
        print(f"per iteration: {1e3 * t['per_iteration_wall']:.1f} ms, waiting for inputs "
              f"{1e3 * t['per_iteration_wait']:.1f} ms; storage read {rec['metrics']['traffic']['storage_bytes']:,} B")
    source.close()
    if world > 1:
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
