"""Entry point of every Dist-DGL process of the emulated cluster (servers and trainers alike).

Started by launch.py as `python -m baselines.distdgl.trainer ARGS.json` with DGL's environment
variables. `dgl.distributed.initialize` runs the server loop and exits for servers; trainers go on:
DistGraph, `node_split` of the training nodes, `DistNodeDataLoader` + `NeighborSampler` with
lsm-gnn's fan-outs and batch size, and lsm-gnn's own model (Dist-DGL's blocks are converted to the
index-based block representation, see `bridge.py`) under DDP with the same optimiser settings.

Each trainer writes `metrics/rank<r>.json`: the seconds of every iteration per stage, the
iteration count of an epoch, network counters of its machine around the timed window, startup
times and, after training, the accuracy on the validation and test nodes.

The `__main__` guard is required: with DGL_NUM_SAMPLER > 0 DGL starts sampler processes with
*spawn*, which re-imports this module.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from pathlib import Path

from lsm_gnn.models.blocks import batch_edges
from lsm_gnn.utils.threads import THREAD_VARS

if os.environ.get("FAKE_MACHINE_ID") is not None:
    # Loopback emulation: every ip_config line is 127.0.0.1, so DGL would call every trainer
    # machine 0. Patched at import time, before `initialize` connects to the servers.
    import dgl.distributed.rpc_client as _rpc_client

    _rpc_client.get_local_machine_id = lambda server_namebook: int(os.environ["FAKE_MACHINE_ID"])


def net_counters(iface: str = "eth0", enabled: bool = True) -> dict | None:
    """rx/tx bytes of `iface` in this process's network namespace (None if it has none)."""
    if not enabled:
        return None
    try:
        for line in Path("/proc/net/dev").read_text().splitlines()[2:]:
            name, data = line.split(":", 1)
            if name.strip() == iface:
                f = data.split()
                return {"rx_bytes": int(f[0]), "tx_bytes": int(f[8])}
    except OSError:
        pass
    return None


def _evaluate(g, model, bridge, sampler, nids, batch_size, dgl, torch):
    """Sampled inference over this trainer's share of `nids`: (correct, count)."""
    correct = count = 0
    if len(nids) == 0:
        return 0, 0
    loader = dgl.dataloading.DistNodeDataLoader(g, nids, sampler, batch_size=batch_size, shuffle=False,
                                                drop_last=False)
    model.eval()
    with torch.no_grad():
        for input_nodes, seeds, blocks in loader:
            x = g.ndata["feat"][input_nodes]
            y = g.ndata["label"][seeds].long()
            logits = bridge.forward(model, bridge.convert_blocks(blocks), x)
            correct += int((logits.argmax(1) == y).sum())
            count += len(seeds)
    model.train()
    return correct, count


def train(args: dict) -> None:
    import dgl
    import torch
    import torch.distributed as tdist
    from torch.nn.parallel import DistributedDataParallel

    from baselines.distdgl import bridge
    from lsm_gnn.train.sync import allreduce_gradients

    t0 = time.perf_counter()
    tb = args.get("testbed")  # the emulated testbed: every stage charged at its part (testbed.py)
    if tb and os.environ.get("DGL_ROLE") == "server":
        from baselines.distdgl.testbed import patch_server

        patch_server(tb, args["metrics_dir"], os.environ.get("DGL_SERVER_ID", "0"))
    dgl.distributed.initialize(args["ip_config"])  # servers never return from here
    t_init = time.perf_counter()
    torch.set_num_threads(int(args.get("threads") or 1))
    rank = int(os.environ["RANK"])
    local_rank = int(os.environ["LOCAL_RANK"])
    world = int(os.environ["WORLD_SIZE"])
    import datetime

    tdist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(args.get("pg_timeout_s", 120))))
    g = dgl.distributed.DistGraph(args["graph_name"], part_config=args["part_config"])
    pb = g.get_partition_book()
    train_nids = dgl.distributed.node_split(g.ndata["train_mask"], pb, force_even=True)
    fanouts = list(args["fanouts"])
    batch_size = int(args["batch_size"])
    sampler = dgl.dataloading.NeighborSampler(fanouts)
    torch.manual_seed(int(args.get("seed", 0)))
    loader = dgl.dataloading.DistNodeDataLoader(g, train_nids, sampler, batch_size=batch_size,
                                                shuffle=bool(args.get("shuffle", True)), drop_last=False)
    charges = None
    if tb:
        from baselines.distdgl.testbed import TrainerCharges

        feat = g.ndata["feat"]
        charges = TrainerCharges(tb, pb, int(feat.shape[1]) * torch.empty(0, dtype=feat.dtype).element_size())
    accel = meet = None
    if args.get("accelerator"):  # emulated: the step is a wait; the meeting keeps the trainers in step
        from lsm_gnn.accelerator import EmulatedAccelerator, load_accelerator
        from lsm_gnn.train.sync import Meeting

        acc = args["accelerator"]
        accel = EmulatedAccelerator(load_accelerator(acc["profile"]), scale=float(acc.get("scale", 1.0)))
        meet = Meeting() if world > 1 else None
    else:
        model = bridge.build_model(args["model"], args["dataset"], len(fanouts))
        model = DistributedDataParallel(model) if world > 1 else model
        opt = torch.optim.Adam(model.parameters(), lr=float(args["lr"]), weight_decay=float(args.get("weight_decay", 0)))
        loss_fn = torch.nn.CrossEntropyLoss()
    t_ready = time.perf_counter()

    iters_per_epoch = -(-len(train_nids) // batch_size)
    warmup = int(args.get("warmup_iters") or 0)
    timed = args.get("timed_iters")
    # the same window as lsm-gnn's loop: every epoch runs warm-up + timed iterations (or all)
    planned = min(iters_per_epoch, warmup + int(timed)) if timed else iters_per_epoch
    epochs = int(args.get("epochs", 1))
    measure_net = args.get("network") == "netns"  # loopback: eth0 would be the host's
    die_at = (args.get("die_at") or {}).get(str(rank))  # fault injection for tests

    iters: list[dict] = []
    epoch_walls: list[float] = []
    losses: list[float] = []
    net_start = None
    it_count = 0
    for epoch in range(epochs):
        tdist.barrier()
        if epoch == min(1, epochs - 1):
            net_start = net_counters(enabled=measure_net)
            tdist.barrier()  # every rank has read its counters before any traffic of these epochs
        t_epoch = time.perf_counter()
        it = iter(loader)
        for step in range(planned):
            if charges is not None:  # the charges of the iterations the record measures
                charges.ch.recording = step >= warmup and epoch >= min(1, epochs - 1)
            ts = time.perf_counter()
            input_nodes, seeds, blocks = next(it) if charges is None else charges.sample(it)
            tc = time.perf_counter()
            # lsm-gnn's model reads index blocks; an emulated step needs no model (a DGL model would
            # take DGL's blocks as they are)
            if charges is None:
                our_blocks = bridge.convert_blocks(blocks) if accel is None else None
            else:
                with charges.ch.host("other"):
                    our_blocks = bridge.convert_blocks(blocks) if accel is None else None
            tf = time.perf_counter()
            if charges is None:
                x = g.ndata["feat"][input_nodes]
                y = g.ndata["label"][seeds].long()
            else:
                x, y = charges.pull(g, input_nodes, seeds)
            tt = time.perf_counter()
            edges = batch_edges(blocks)
            copy_s = 0.0
            if charges is not None:  # the batch's copy to the GPU (PCIe)
                charges.copy_to_gpu(x, y, edges)
                copy_s = time.perf_counter() - tt
                tt = time.perf_counter()
            busy = 0.0
            # the gradient all-reduce (emulated: the meeting) is timed apart, as `sync` (lsm_gnn.train.sync)
            if accel is not None:
                busy = accel.step(len(input_nodes), edges)
                tb = time.perf_counter()
                if meet is not None:
                    meet()
                ta = time.perf_counter()
            else:
                with (model.no_sync() if world > 1 else contextlib.nullcontext()):
                    logits = bridge.forward(model, our_blocks, x)
                    loss = loss_fn(logits, y)
                    opt.zero_grad()
                    loss.backward()
                tb = time.perf_counter()
                if world > 1:
                    allreduce_gradients(model.parameters(), world)
                ta = time.perf_counter()
                opt.step()
                losses.append(float(loss.detach()))
            te = time.perf_counter()
            iters.append({"epoch": epoch, "step": step, "sample": tc - ts, "convert": tf - tc,
                          "fetch": tt - tf - copy_s, "copy": copy_s,
                          "train": (tb - tt) + (te - ta), "sync": ta - tb, "total": te - ts,
                          "input_rows": int(len(input_nodes)),
                          "seeds": int(len(seeds)), "edges": edges, "busy": busy,
                          "feature_bytes": int(x.numel() * x.element_size())})
            it_count += 1
            if die_at is not None and it_count >= int(die_at):
                os.kill(os.getpid(), 9)
        del it  # a cut-short epoch: drop the rest of the iterator
        epoch_walls.append(time.perf_counter() - t_epoch)
    tdist.barrier()
    net_end = net_counters(enabled=measure_net)

    acc = {"val": None, "test": None}
    if args.get("eval", True) and accel is None:
        for split in ("val", "test"):
            nids = dgl.distributed.node_split(g.ndata[f"{split}_mask"], pb, force_even=True)
            if args.get("eval_nodes"):
                nids = nids[: max(1, int(args["eval_nodes"]) // world)]
            c, n = _evaluate(g, model, bridge, sampler, nids, batch_size, dgl, torch)
            tot = torch.tensor([c, n], dtype=torch.float64)
            tdist.all_reduce(tot)
            acc[split] = float(tot[0] / tot[1]) if tot[1] > 0 else None

    out = {"rank": rank, "local_rank": local_rank, "machine": int(os.environ.get("LSM_MACHINE_ID", 0)),
           "part_id": int(g.get_partition_book().partid), "world_size": world,
           "num_train_nids": int(len(train_nids)), "iters_per_epoch": iters_per_epoch,
           "warmup_iters": warmup, "timed_iters": int(timed) if timed else None, "planned_iters": planned,
           "iterations": iters, "epoch_walls": epoch_walls, "losses": losses,
           "accelerator": accel.record() if accel is not None else None,
           "overshoot_s_per_step": accel.overshoot_s / max(1, accel.steps) if accel is not None else None,
           "net_start": net_start, "net_end": net_end, "accuracy": acc,
           "startup": {"initialize_s": t_init - t0, "setup_s": t_ready - t_init},
           "testbed": charges.record() if charges is not None else None,
           "threads": {"torch": torch.get_num_threads(), "env": {k: os.environ.get(k) for k in THREAD_VARS}}}
    mdir = Path(args["metrics_dir"])
    tmp = mdir / f".rank{rank}.json.partial"
    tmp.write_text(json.dumps(out))
    os.replace(tmp, mdir / f"rank{rank}.json")
    tdist.barrier()
    tdist.destroy_process_group()


def main(argv: list[str]) -> None:
    if len(argv) != 1:
        sys.exit("usage: python -m baselines.distdgl.trainer ARGS.json")
    args = json.loads(Path(argv[0]).read_text())
    try:
        train(args)
    except (Exception, KeyboardInterrupt):
        # DGL's atexit handler waits for the servers, which wait for every client: a trainer
        # that failed must leave at once so that the launcher sees the failure.
        import traceback

        traceback.print_exc()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)


if __name__ == "__main__":
    main(sys.argv[1:])
