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

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from lsm_gnn.utils.errors import ConfigError

PACKAGED = ("this-machine", "paper", "h200x8")
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
    train_step_s: float = Field(gt=0)
    """One train step (forward, backward, optimiser) of one worker on the reference batch."""
    reference_input_rows: float = Field(gt=0)
    """Input rows of the reference batch."""
    train_fixed_s: float = Field(0.0, ge=0)
    """The part of train_step_s every step pays whatever its size (kernel launches, optimiser,
    framework): a batch of R rows costs train_fixed_s + (train_step_s - train_fixed_s) x R /
    reference_input_rows."""
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
        if self.compute.device == "gpu" and self.compute.memory_bandwidth is None:
            raise ValueError("compute.memory_bandwidth: required when compute.device is gpu")
        if self.compute.train_fixed_s > self.compute.train_step_s:
            raise ValueError(f"compute.train_fixed_s: at most compute.train_step_s ({self.compute.train_step_s}), "
                             f"found {self.compute.train_fixed_s}")
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
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or p.exists():
        return p
    return PROFILE_DIR / f"{name_or_path}.yaml"


def _key(loc) -> str:
    return ".".join(str(x) for x in loc if not (isinstance(x, str) and x.startswith("function-"))) or "(root)"


def parse_profile(data, source: str) -> Profile:
    if not isinstance(data, dict):
        raise ConfigError(source, "(root)", f"a profile is a mapping of sections, found {type(data).__name__}")
    try:
        return Profile.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        key, msg = _key(err["loc"]), err["msg"]
        if err["type"] == "missing":
            msg = "required key is missing"
        elif err["type"] == "extra_forbidden":
            msg = "unknown key"
        elif err["type"] == "value_error" and msg.startswith("Value error, "):
            # the cross-field checks put the key first: "compute.memory_bandwidth: required ..."
            k, _, rest = msg[len("Value error, "):].partition(": ")
            key, msg = k, rest
        n = len(e.errors())
        raise ConfigError(source, key, msg + (f" (and {n - 1} more problem{'s' if n > 2 else ''})" if n > 1 else "")) \
            from None


def load_profile(name_or_path: str | os.PathLike) -> Profile:
    """A packaged profile by name, or a YAML file by path; validated."""
    path = profile_path(name_or_path)
    source = path.name if str(name_or_path) in PACKAGED else os.fspath(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ConfigError(os.fspath(name_or_path), "(file)",
                          f"no such profile file; packaged profiles: {', '.join(PACKAGED)}") from None
    except OSError as e:
        raise ConfigError(source, "(file)", f"cannot read: {e.strerror or e}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        raise ConfigError(source, "(yaml)", f"not valid YAML: {where}{getattr(e, 'problem', None) or e}") from None
    return parse_profile(data, source)
