"""Hardware profiles of the projection: YAML files, validated on load.

A profile names a packaged file (`lsm_gnn/project/profiles/<name>.yaml`: `this-machine`, `paper`,
`h200x8`) or a path. An unknown key, a missing one, a wrong type or a value out of range is a
`ConfigError` naming the file and the dotted key (`paper.yaml: storage.ssd_iops: ...`).

Units: seconds, bytes, bytes per second, operations per second, rows per second. Every number in
the packaged profiles carries its source in a comment: measured (the command), public (the
document), or assumption (its basis). docs/projection.md describes every field.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from lsm_gnn.accelerator import StepModel
from lsm_gnn.utils.yamlmodel import load_model, parse_model, yaml_path

from lsm_gnn.choices import HARDWARE_PROFILES as PACKAGED  # the one list, which the config reads too
PROFILE_DIR = Path(__file__).resolve().parent / "profiles"


class _S(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Link(_S):
    bandwidth: float = Field(gt=0, description="bytes per second, one direction, one endpoint")
    latency_s: float = Field(0.0, ge=0)


class Compute(_S):
    device: Literal["cpu", "gpu"]
    """Where the train step runs: `cpu` shares the cores with sampling and fetching."""
    devices_per_node: int = Field(ge=1)
    step: StepModel | None = None
    """The train step of one worker: fixed_s + row_s x R + edge_s x E for a batch of R input rows and
    E edges (lsm_gnn.accelerator: the same model the emulated accelerators wait). Required unless
    `accelerator` is given; beside it, the constants set here override the accelerator's."""
    accelerator: str | None = None
    """An accelerator profile (lsm_gnn.accelerator: a100, h200, or a path) whose step model is the train
    step; its memory bandwidth is the default of `memory_bandwidth`."""
    reference: str = ""
    """What the reference batch is (model, batch size, fan-outs): documentation only."""
    memory_bandwidth: float | None = Field(None, gt=0)
    """Device memory (HBM) bandwidth of a GPU, for cache gathers and the reorder (gpu only)."""
    sample_rows_per_s: float = Field(gt=0)
    """Input rows per second the lsm-gnn sampler produces for one worker (GPU or one CPU core)."""


class Cpu(_S):
    cores: int = Field(ge=1)
    """Cores per node that the workers' threads share."""
    cache_row_s: float = Field(0.0, ge=0)
    """CPU time per requested row of the software cache on a CPU profile (lookup, copy, insert)."""
    io_cpu_s: float = Field(0.0, ge=0)
    """CPU time per storage read issued by the host (AIO submit and reap); 0 for GPU-initiated reads."""
    fault_cpu_s: float = Field(0.0, ge=0)
    """CPU time per page fault of the mmap loader, beside the device latency."""
    kvstore_row_s: float = Field(ge=0)
    """Dist-DGL: CPU time per pulled row of the KVStore (id mapping, RPC, (de)serialisation, gather)."""
    rpc_sample_rows_per_s: float = Field(gt=0)
    """Dist-DGL: input rows per second that sampling over RPC yields for one trainer."""
    kvstore_server_row_s: float = Field(0.0, ge=0)
    """Dist-DGL: a server's CPU time per row it sends to another machine (its pull and sampling
    request handlers together; one request at a time per server process): the `server` floor,
    rows sent per machine x this / servers per machine. 0: no such floor (the servers' cores are
    then only counted in the CPU contention)."""
    host_time_factor: float = Field(1.0, gt=0)
    """f: seconds this profile's host core takes for what this machine's core does in one second
    (the emulated testbed charges host stages at S x f x their thread CPU time). Each profile states
    its range and basis beside it."""
    index_s: float | None = Field(None, gt=0)
    """The CPU speed index (lsm_gnn.project.calibrate) measured with these CPU figures: lets
    `lsm-gnn project --calibrate-cpu` scale them to the speed the runs had."""


class Storage(_S):
    ssds_per_device: float = Field(gt=0)
    """SSDs per device; with `shared: true`, the SSDs of the whole node, shared by every worker."""
    shared: bool = False
    ssd_iops: float = Field(gt=0)
    """Random 4 KiB reads per second of one SSD."""
    ssd_bandwidth: float = Field(gt=0)
    """Sequential read bytes per second of one SSD."""
    latency_s: float = Field(gt=0)
    """One 4 KiB read at queue depth 1."""
    queue_depth: int = Field(ge=1)
    """Reads in flight per worker for the readers that batch their reads (lsm, isolated, direct)."""
    gpu_initiated: bool = False
    """BaM: the GPU issues the reads and the rows land in GPU memory over PCIe, no CPU per read."""
    fault_s: float | None = Field(None, gt=0)
    """Measured: seconds per page fault of the mmap loader with `fault_processes` processes
    faulting at once under the page-cache cap (`lsm-gnn bench storage`: fault.capped_mmap_s).
    Replaces latency + queueing + fault_cpu_s when that many workers fault on the SSDs."""
    fault_processes: int | None = Field(None, ge=1)
    """How many processes faulted at once when `fault_s` was measured."""


class Links(_S):
    pcie: Link
    """Host <-> one device."""
    nvlink: Link | None = None
    """Device <-> device; absent: the all-to-all goes peer-to-peer over PCIe."""
    nic: Link
    """One machine's network port (Dist-DGL)."""
    exchange: Link | None = None
    """CPU profiles: the all-to-all between worker processes (gloo), CPU work on both ends."""
    host_memory: Link
    """One core's gather of random 4 KiB rows in host memory."""


class Profile(_S):
    name: str
    description: str = ""
    compute: Compute
    cpu: Cpu
    storage: Storage
    links: Links
    notes: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _consistent(self):
        cp = self.compute
        if cp.step is None and cp.accelerator is None:
            raise ValueError("compute.step: required unless compute.accelerator names an accelerator profile")
        if cp.accelerator is not None:
            from lsm_gnn.accelerator import load_accelerator

            acc = load_accelerator(cp.accelerator)
            # constants given beside the accelerator (--set compute.step.fixed_s=...) override its own
            given = cp.step.model_dump(include=cp.step.model_fields_set) if cp.step is not None else {}
            cp.step = acc.step.model_copy(update=given)
            if cp.memory_bandwidth is None:
                cp.memory_bandwidth = acc.memory_bandwidth
        if self.compute.device == "gpu" and self.compute.memory_bandwidth is None:
            raise ValueError("compute.memory_bandwidth: required when compute.device is gpu")
        if (self.storage.fault_s is None) != (self.storage.fault_processes is None):
            raise ValueError("storage.fault_s: comes with storage.fault_processes (how many processes faulted "
                             "at once when it was measured)")
        if self.compute.device == "cpu" and self.links.exchange is None:
            raise ValueError("links.exchange: required when compute.device is cpu (the all-to-all of the ranks)")
        return self

    @property
    def cpu_only(self) -> bool:
        return self.compute.device == "cpu"


def profile_path(name_or_path: str | os.PathLike) -> Path:
    return yaml_path(name_or_path, PROFILE_DIR)


def parse_profile(data, source: str) -> Profile:
    return parse_model(Profile, data, source)


def load_profile(name_or_path: str | os.PathLike) -> Profile:
    """A packaged profile by name, or a YAML file by path; validated."""
    return load_model(Profile, name_or_path, PROFILE_DIR, PACKAGED)
