"""The emulated testbed's one table: every timed stage of every system, mapped to the part of the
paper's testbed that runs it (issue 43, docs/accelerators.md, "Every stage at its part's speed").

In the paper's testbed (LSM-GNN: one node, 2 GPUs, NVMe SSDs read with BaM; Dist-DGL: 2 nodes x 2
GPUs over a NIC) a stage runs on one of six parts:

- `accelerator`: the train step (the emulated accelerator's wait, lsm_gnn.accelerator);
- `gpu`: kernels of the data plane on the GPU (LSM-GNN's cache decisions, gather, reorder,
  sampling), charged from the GPU engine's measured rates (GPU_RATES) where one applies;
- `pcie`: host <-> device and peer-to-peer copies (LSM-GNN's id and row exchange on a node
  without NVLink, the victim buffer's copies, Dist-DGL's copy of each batch to its GPU);
- `nic`: the network between Dist-DGL's machines (bytes, round trips, the gradient all-reduce);
- `ssd`: the storage device model (lsm_gnn.storage.device_model);
- `host`: work on the host CPU (Dist-DGL's sampling, KVStore handlers, partition lookups and local
  copies; every loader's host-side work), charged at S x f x its thread CPU time.

The emulation (lsm_gnn.storage.charge, baselines/distdgl), the projection (lsm_gnn.project.model:
every projected stage names the stage(s) of this table it is, `TABLE_STAGES`, and takes its part
from here; `read_submit`, `storage_to_device`, `reorder`, `page_cache` and the loaders'
`copy_to_gpu` are its finer stages) and the report read the part of a stage here; a stage not in the table is an error (`part_of`). A stage's `record_stage`
is the stage of the run record (lsm_gnn.records.STAGES) its time is reported under; `charged`
says whether the emulation charges it at that part's model today (False: its real time / S, the
old dilation, which for a `gpu` stage is an upper bound only where the GPU is faster than this
machine's core and for a `host` stage runs the host S times too fast).

A leaf (it imports only the error type), so every floor can read it.
"""

from __future__ import annotations

from dataclasses import dataclass

from lsm_gnn.utils.errors import InputError

PARTS = ("accelerator", "gpu", "pcie", "nic", "ssd", "host")

CORE_PROBE_REF_S = 0.00064
"""Thread CPU seconds of one repeat of lsm_gnn.storage.charge.probe_seconds on the reference core,
the core a host stage's f is stated against: this project's 2-core VM (AMD EPYC) at the speed of the
this-machine profile's CPU index (cpu.index_s 0.0292 s). Measured as a ratio, so that the VM's
speed of the moment cancels: probe / index over 7 alternating pairs, one core, 2026-12-05 06:15 UTC
beside the reference run's testbed, median 0.0219 (0.0164-0.0249); 0.0292 x 0.0219 = 0.00064 s."""


@dataclass(frozen=True)
class StagePart:
    part: str
    record_stage: str
    """The run record's stage (lsm_gnn.records.STAGES) this stage's time is reported under."""
    basis: str
    """Why this part runs it in the paper's testbed."""
    charged: bool = False
    """True where the emulation charges it at the part's model (lsm_gnn.storage.charge); False:
    its real time divided by S (the part's model not applied yet)."""


def _lsm_like(exchange: bool) -> dict[str, StagePart]:
    """LSM-GNN's stages (`exchange`: the shared cache, whose source charges its exchange and its
    cache work: lsm_gnn.sources.shared), or the isolated caches' (none charged yet)."""
    xb = ("peer-to-peer over PCIe: the paper's node has no NVLink (lsm_gnn/project/profiles/paper.yaml, "
          "links.nvlink null)")
    return {
        "sample": StagePart("gpu", "sample", "GIDS/LSM-GNN sample on the GPU (paper.yaml compute.sample_rows_per_s)"),
        "exchange_ids": StagePart("pcie", "exchange_ids", xb if exchange else "nothing exchanged (0)",
                                  charged=exchange),
        "fetch_cache": StagePart("gpu", "fetch_cache", "the software cache's decisions and gather are GPU kernels "
                                                         "(the GPU engine, reports/gpu/)", charged=exchange),
        "fetch_victim": StagePart("pcie", "fetch_victim", "the victim buffer is pinned host memory copied to the device"),
        "fetch_storage": StagePart("ssd", "fetch_storage", "BaM reads of the SSDs (the device model)", charged=True),
        "read_submit": StagePart("host", "fetch_storage", "host-issued reads (a profile without BaM): the host's "
                                                          "submit and reap of each read"),
        "storage_to_device": StagePart("pcie", "fetch_storage", "the rows read land in GPU memory over PCIe (BaM), "
                                                                "or cross it from host memory"),
        "exchange_rows": StagePart("pcie", "exchange_rows", xb if exchange else "nothing exchanged (0)",
                                   charged=exchange),
        "reorder": StagePart("gpu", "exchange_rows", "the received rows put in batch order (a GPU kernel)"
                             if exchange else "nothing exchanged (0)"),
        "train": StagePart("accelerator", "train", "the GPU's train step (the step model)", charged=True),
        "sync": StagePart("pcie", "sync", "the gradient all-reduce between the node's 2 GPUs (peer-to-peer PCIe)"),
        "other": StagePart("host", "other", "the training loop's host bookkeeping"),
    }


def _loader(fetch: str, basis: str) -> dict[str, StagePart]:
    return {
        "sample": StagePart("host", "sample", "a host-side loader samples on the CPU (DGL's CPU sampler)"),
        "exchange_ids": StagePart("host", "exchange_ids", "nothing exchanged (0)"),
        "fetch_cache": StagePart("host", "fetch_cache", "the loader's host-side lookup and gather"),
        "fetch_victim": StagePart("host", "fetch_victim", "no victim buffer (0)"),
        "fetch_storage": StagePart(fetch, "fetch_storage", basis, charged=(fetch == "ssd")),
        "read_submit": StagePart("host", "fetch_storage", "the host's submit and reap of each read (AIO)"),
        "page_cache": StagePart("host", "fetch_storage", "the page cache's own work per fault (mmap)"),
        "copy_to_gpu": StagePart("pcie", "fetch_cache", "the batch's rows copied from host memory to the GPU"),
        "exchange_rows": StagePart("host", "exchange_rows", "nothing exchanged (0)"),
        "train": StagePart("accelerator", "train", "the GPU's train step (the step model)", charged=True),
        "sync": StagePart("pcie", "sync", "the gradient all-reduce between the node's 2 GPUs (peer-to-peer PCIe)"),
        "other": StagePart("host", "other", "the training loop's host bookkeeping"),
    }


TABLE: dict[str, dict[str, StagePart]] = {
    "lsm": _lsm_like(exchange=True),
    "isolated": _lsm_like(exchange=False),
    "direct": _loader("ssd", "host-issued reads of the SSDs (the device model)"),
    "buffered": _loader("ssd", "host-issued reads of the SSDs through the page cache (the device model)"),
    "mmap": _loader("ssd", "page faults served by the SSDs (real faults: not paced by the device model)"),
    "memory": _loader("host", "every row in host memory: the gather is host work"),
    "distdgl": {
        # the trainers' own stages (baselines/distdgl/trainer.py), each charged where it runs
        "sample": StagePart("host", "sample", "DistNodeDataLoader: the trainer's sampling of its local partition and "
                                              "the RPCs it waits on (DGL samples on the CPU)", charged=True),
        "sample_rpc": StagePart("nic", "sample", "one round trip per sampling RPC to another machine (RTT x S)",
                                charged=True),
        "server_sample": StagePart("host", "sample", "a server's sampling request handler (a server core)",
                                   charged=True),
        "exchange_rows": StagePart("host", "exchange_rows", "the KVStore pull: partition lookups, id mapping and "
                                                            "local copies on the trainer's core", charged=True),
        "pull_rpc": StagePart("nic", "exchange_rows", "one round trip per pull RPC to another machine, and the "
                                                      "remote rows' bytes over the NIC", charged=True),
        "server_pull": StagePart("host", "exchange_rows", "a server's pull handler: the gather of the rows asked "
                                                          "for (a server core)", charged=True),
        "copy_to_gpu": StagePart("pcie", "other", "each batch's features and blocks copied to the trainer's GPU",
                                 charged=True),
        "exchange_ids": StagePart("host", "exchange_ids", "nothing exchanged apart from the pull (0)"),
        "fetch_cache": StagePart("host", "fetch_cache", "no cache (0)"),
        "fetch_victim": StagePart("host", "fetch_victim", "no victim buffer (0)"),
        "fetch_storage": StagePart("host", "fetch_storage", "every row in the servers' memory: no storage (0)"),
        "train": StagePart("accelerator", "train", "the GPU's train step (the step model)", charged=True),
        "sync": StagePart("nic", "sync", "the gradient all-reduce between the 2 machines' GPUs over the NIC"),
        "other": StagePart("host", "other", "DGL block -> lsm-gnn Block conversion (host)", charged=True),
    },
}


@dataclass(frozen=True)
class GpuRate:
    """A GPU kernel stage's time: fixed_s per batch + per_request_s x requests."""

    fixed_s: float
    per_request_s: float
    source: str

    def seconds(self, requests: float) -> float:
        return self.fixed_s + self.per_request_s * float(requests)


GPU_RATES: dict[str, GpuRate] = {
    # the GPU engine's sweep (H200, hybrid + PVP): 0.82 / 1.02 / 1.23 ms a batch at 21k / 81k / 315k
    # requests; the line through the ends: 0.79 ms + 1.39 ns a request (the second call's sweep, 0.70 /
    # 0.90 / 1.12 ms, gives 0.67 ms + 1.43 ns: the fixed part moves by machine, the slope does not)
    "fetch_cache": GpuRate(fixed_s=7.9e-4, per_request_s=1.39e-9,
                           source="reports/gpu/2026-12-04-h200-3 engine_sweep (README.md)"),
}


def systems() -> tuple[str, ...]:
    return tuple(TABLE)


def charges(system: str, part: str) -> bool:
    """Whether the emulation charges a stage of `system` at `part` (one of PARTS). Read as: `host`,
    whether f (emulation.host_speed) moves its emulated epoch; `ssd`, whether it needs the emulated
    device paced (Dist-DGL and the in-memory ideal hold every row in memory); `gpu`, whether its own
    run, not the storage and host probe, tells whether a time scale paces it (this machine's engine
    does the GPU's work)."""
    if part not in PARTS:
        raise InputError(f"the testbed has no part {part!r}; expected one of {', '.join(PARTS)}")
    return any(v.part == part and v.charged for v in TABLE.get(system, {}).values())


def part_of(system: str, stage: str) -> StagePart:
    """The part that runs `stage` of `system` in the paper's testbed; an error names what is missing."""
    rows = TABLE.get(system)
    if rows is None:
        raise InputError(f"the testbed's stage table (lsm_gnn/testbed.py) has no system {system!r}; "
                         f"expected one of {', '.join(TABLE)}")
    got = rows.get(stage)
    if got is None:
        raise InputError(f"the testbed's stage table (lsm_gnn/testbed.py) has no stage {stage!r} of system "
                         f"{system!r}; expected one of {', '.join(rows)}")
    return got


def component(system: str, record_stage: str) -> str:
    """The part a run record's stage (lsm_gnn.records.STAGES) is charged to: the part of the table's
    stage of that name (every record stage of every system is one, tests/test_testbed.py)."""
    return part_of(system, record_stage).part


def as_record(system: str) -> dict:
    """What a record or report says about a system's stages: part, record stage, charged, basis."""
    part_of(system, "train")  # the system exists
    return {k: {"part": v.part, "record_stage": v.record_stage, "charged": v.charged, "basis": v.basis}
            for k, v in TABLE[system].items()}


def stage_view(system: str, per_iteration: dict | None, testbed: dict | None = None,
               storage_late_fraction: float | None = None) -> dict | None:
    """Each record stage of a run: its seconds per iteration (as given), `component` (its part) and
    `late_fraction` (how late its charged work ended over its charged time: from the testbed's charges
    of the table stages reported under it, the storage pacing for an `ssd` stage; None where the stage
    is not charged at its part's model yet, `charged` False)."""
    if per_iteration is None or system not in TABLE:
        return None
    by_record: dict[str, list[float]] = {}
    for name, st in ((testbed or {}).get("stages") or {}).items():
        rs = TABLE[system].get(name)
        if rs is not None:
            acc = by_record.setdefault(rs.record_stage, [0.0, 0.0])
            acc[0] += st.get("charged_s") or 0.0
            acc[1] += st.get("late_s") or 0.0
    out = {}
    for stage, sec in per_iteration.items():
        p = part_of(system, stage)
        late = None
        if stage in by_record:
            ch, lt = by_record[stage]
            late = (lt / ch) if ch else 0.0
        elif p.part == "ssd" and p.charged:
            late = storage_late_fraction
        out[stage] = {"seconds": sec, "component": p.part, "charged": p.charged or stage in by_record,
                      "late_fraction": late}
    return out
