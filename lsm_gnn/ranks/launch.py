"""Run G ranks on one machine and write one run record; the torchrun entry for several machines.

`run_multi_device(cfg)` writes the per-owner files once (shared mode), spawns
`cfg.distributed.devices` ranks and watches them (spawn.py), each joining a torch.distributed
process group (group.py: gloo on the CPU, NCCL on CUDA) and running a worker (workers.py: the
training loop by default, or a trace replay), then merges the ranks' results into one record
(merge.py). A failed rank stops the others; the record says which one failed ("failed" status,
`failure.rank`) and a `DistributedError` names it.

`python -m lsm_gnn.ranks.launch` / `torchrun ... -m lsm_gnn.ranks.launch` runs
`torchrun_main` (docs/multi-device.md).
"""

from __future__ import annotations

import os
import sys

from lsm_gnn.config import RunConfig, config_to_dict
from lsm_gnn.multidevice.group import init_process_group, resolve_backend
from lsm_gnn.multidevice.health import Heartbeat
from lsm_gnn.ranks.merge import RunHead, failed_record, merge_records
from lsm_gnn.ranks.spawn import run_ranks
from lsm_gnn.ranks.workers import train_worker
from lsm_gnn.records import claim_record, emulation_records, system_name, write_record
from lsm_gnn.utils.errors import ConfigError, DistributedError, InputError, LsmGnnError


def run_head(cfg: RunConfig) -> RunHead:
    """What the merged record states of the run, computed once from its config (lsm_gnn.ranks.merge)."""
    return RunHead(system_name(cfg), config_to_dict(cfg), cfg.distributed.mode,
                   resolve_backend(cfg.distributed, cfg.train.device))


def run_multi_device(cfg: RunConfig, *, worker: str = "train", worker_args: dict | None = None,
                     record_path: str | os.PathLike | None = None, raise_on_failure: bool = True,
                     progress: bool = True) -> dict:
    """Run G ranks on this machine; return the merged run record (also written to the record path)."""
    from lsm_gnn.utils.machine import cpu_time_around

    G = cfg.distributed.devices
    head = run_head(cfg)
    record_path = record_path or cfg.output.record
    error = None
    with claim_record(record_path or None):  # checked and locked before the ranks start
        try:
            if cfg.distributed.mode == "shared" and G > 1:
                from lsm_gnn.multidevice.owner_files import ensure_owner_files

                ensure_owner_files(cfg.dataset.path, G, out_dir=cfg.dataset.owners_dir, progress=progress,
                                   rank_dirs=cfg.storage.rank_dirs)  # once, before the ranks
            with cpu_time_around() as cpu:  # the ranks are this process's children, reaped by the end
                results, failure, wall = run_ranks(cfg, worker, worker_args or {})
        except Exception as e:
            # a failure before or while starting the ranks (a dataset that does not open, owner files
            # that cannot be written, ranks that cannot be spawned) is a failed run, with its record;
            # a config or argument rejected before anything ran is an error only, as in one process
            if not record_path or isinstance(e, (ConfigError, InputError)):
                raise
            error, failure = e, {"rank": None, "message": f"{type(e).__name__}: {e}"}
        if failure is None:
            record = merge_records(head, results, worker, wall)
            emulation_records(record, cfg, cpu)
        else:  # the one failed record: a rank's failure, or one before the ranks ran
            record = failed_record(head, failure, worker)
        if record_path:
            write_record(record_path, record)
    if error is not None:
        raise error
    if failure is not None and raise_on_failure:
        err = DistributedError(failure["rank"], failure["message"])
        err.record = record
        raise err
    return record


def torchrun_main(argv: list[str] | None = None) -> None:
    """Entry for `torchrun ... -m lsm_gnn.ranks.launch --config FILE [key=value ...]` (multi-node).

    torchrun sets RANK, WORLD_SIZE, MASTER_ADDR/PORT; every rank runs the training worker; rank 0
    writes the record of its own metrics plus the per-rank figures gathered with all_gather_object.
    """
    import torch.distributed as dist

    from lsm_gnn.config import load_config

    argv = list(sys.argv[1:] if argv is None else argv)
    path = None
    if argv[:1] == ["--config"]:
        path, argv = argv[1], argv[2:]
    cfg = load_config(path, argv)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    init_process_group(cfg.distributed, cfg.train.device, rank, world)
    hb = Heartbeat(rank)
    result = train_worker(cfg, rank, world, hb, {})
    gathered = [None] * world
    dist.all_gather_object(gathered, result)
    if rank == 0:
        record = merge_records(run_head(cfg), gathered, "train", 0.0)
        if cfg.output.record:
            write_record(cfg.output.record, record)
    dist.destroy_process_group()


def main() -> None:
    """`python -m lsm_gnn.ranks.launch` entry."""
    try:
        torchrun_main()
    except LsmGnnError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
