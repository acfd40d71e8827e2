"""Run configuration: YAML files validated on load.

An unknown key, a wrong type or an out-of-range value is a `ConfigError` that names the file
and the dotted key. Command-line flags override the file with the same dotted keys (for example
`cache.policy=static`), set in the YAML document before it is validated
(lsm_gnn.utils.yamlmodel.apply_overrides).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from lsm_gnn.choices import ACCELERATOR_PROFILES, ENGINES, HARDWARE_PROFILES, READERS
from lsm_gnn.utils.errors import ConfigError, InputError
from lsm_gnn.utils.seeds import SEED_MAX
from lsm_gnn.utils.yamlmodel import apply_overrides, load_yaml, shorten


def policy_names() -> tuple[str, ...]:
    """The eviction policies cache.policy accepts: derived from the one registry,
    lsm_gnn.cache.policies (imported on first use, so that loading this module stays light)."""
    from lsm_gnn.cache.policies import configurable_names

    return configurable_names()


def __getattr__(name: str):
    if name == "POLICIES":  # `from lsm_gnn.config import POLICIES`: the registry's names
        return policy_names()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
BYTES_MAX = 2**62
"""The largest byte count a setting takes: int64 arithmetic on it (offsets, sums of two) stays exact."""


class Section(BaseModel):
    # every number finite (an infinite timeout or capacity is no setting: `1e400` reads as inf)
    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)

    @field_validator("*")
    @classmethod
    def _within_int64(cls, v):
        """Every integer of a setting (a list's too) within int64, where numpy and torch take it:
        10**20 threads or a fan-out of 10**20 were OverflowErrors deep in a run."""
        for x in (v if isinstance(v, list) else [v]):
            if isinstance(x, int) and not isinstance(x, bool) and not INT64_MIN <= x <= INT64_MAX:
                raise ValueError(f"an integer within int64 is expected ([{INT64_MIN}, {INT64_MAX}]), found {x}")
        return v


class DatasetConfig(Section):
    path: str = "data/synthetic-tiny"
    """Directory in the lsm-gnn dataset format (see docs/dataset-format.md)."""
    owners_dir: str | None = None
    """Folder under which the shared cache's per-owner feature files go (owners-G/ for G devices;
    lsm_gnn/multidevice/owner_files.py); null: the dataset's own folder. The workflow makes them in
    results/ (rule owner_files), so that nothing is written into a dataset folder."""


class StorageConfig(Section):
    reader: Literal[READERS] = "direct"
    queue_depth: int = Field(128, ge=1, le=4096)
    """Reads in flight with the aio and io_uring backends."""
    threads: int = Field(64, ge=1, le=256)
    """Reader threads of the thread-pool backend: each keeps one read in flight."""
    backend: Literal["auto", "aio", "io_uring", "threads"] = "auto"
    """auto: Linux native AIO where the kernel offers it, else the thread pool."""
    drop_page_cache: bool = True
    block_size: int = Field(4096, ge=512, multiple_of=512)
    """Storage read unit: every read covers whole blocks (read amplification below this size)."""
    max_io_bytes: int = Field(1 << 20, ge=512)
    """Adjacent blocks are merged into reads of at most this many bytes."""
    verify_checksums: bool = True
    """Check every row read from storage against its checksum (features.xxh3.npy); a row that
    differs stops the run naming the file and the row. Measured at a few % of the random-read rate
    (docs/storage.md, "Row checksums"), so on by default."""
    rank_dirs: list[str] | None = None
    """One folder per rank, each on that rank's own drive (the paper gives each GPU its own SSDs;
    docs/run-on-your-gpus.md): with G ranks, G folders, rank r's storage in the r-th. The shared
    cache (lsm) keeps rank r's owner file there (`owners-G/owner-r.bin`, in place of
    dataset.owners_dir); every other system's rank r reads a full replica of features.bin there
    (`owners-1/owner-0.bin`, as the authors' isolated baseline reads its own SSD). Both are written
    on first use by the owner-file writer (lsm_gnn/multidevice/owner_files.py: every row checked
    against its checksum, a manifest tying the file to features.bin). null: every rank reads the
    dataset's folder (or dataset.owners_dir)."""
    mmap_advice: Literal["normal", "random"] = "normal"
    """mmap reader: "random" (MADV_RANDOM) turns kernel readahead off (the page-cache-capped mmap
    baseline sets it: under a small cap readahead evicts the rows being gathered)."""
    device: Literal["real", "emulated"] = "real"
    """real: the reads go to this machine's disk. emulated: the direct and buffered readers read
    the rows from a page-cache-resident copy of the file and complete each read when the storage
    device model says (lsm_gnn.storage.emulated, docs/storage.md); mmap's page faults stay real."""
    device_profile: str = "paper"
    """The emulated storage device: a packaged profile (vm, paper, optane) or a YAML file in its
    schema (lsm_gnn.storage.device_model.DeviceProfile)."""

    @field_validator("device_profile")
    @classmethod
    def _known_device_profile(cls, v):
        from lsm_gnn.storage.device_model import PACKAGED, is_known_profile

        if not is_known_profile(v):
            raise ValueError(f"unknown storage device profile; expected one of {', '.join(PACKAGED)} or a .yaml path")
        return v


class VictimBufferConfig(Section):
    enabled: bool = True
    host_fraction: float | None = Field(None, ge=0.0, lt=1.0)
    """Share of the device's total budget (cache.capacity_*) given to the host tier: W victim
    queues + the PVP landing buffer, `depth` lines each, depth = floor(share x total / (W + 1)).
    None: the policy's share, 0.10 (the share in the authors' setting) for the paper's policies
    and the classic ones, 0 for horizon (lsm_gnn.cache.budget, docs/memory-budget.md)."""
    depth: int | None = Field(None, ge=1)
    """Lines per queue, set absolutely (the paper's scripts: 32768) instead of by host_fraction;
    it still comes out of the total budget."""
    force: bool = False
    """Accept an explicit depth whose host tier exceeds the device cache or the rows it could hold."""


class CacheConfig(Section):
    enabled: bool = True
    capacity_fraction: float | None = Field(0.10, gt=0.0, le=1.0)
    """Total feature memory per device (device cache + victim buffer + landing buffer) as a
    fraction of the feature bytes (ignored if capacity_bytes is set); lsm_gnn.cache.budget."""
    capacity_bytes: int | None = Field(None, ge=1, le=BYTES_MAX)
    ways: int = Field(32, ge=1, le=1024)
    policy: str = "hybrid"
    """An eviction policy of the registry (lsm_gnn.cache.policies; `policy_names()`), or one of your
    own: `package.module:Class` or `path/to/file.py:Class` (docs/cache.md, "A policy of your own")."""
    window: int = Field(8, ge=0, le=1024)
    """Lookahead window W: future mini-batches whose requests feed the reuse tags, and the
    number of victim queues."""
    lookahead: int = Field(128, ge=1, le=65536)
    """K: future mini-batches a long-lookahead policy (horizon) reads; the loader samples
    max(W, K) batches ahead for it (policies.lookahead_horizon). 128 chosen by measurement
    (docs/cache.md, "Beyond the paper"); the one place this default is written."""
    refresh_every: int = Field(1, ge=1)
    readahead: bool = True
    """Read the next batch's predicted storage misses while this batch's rows are exchanged,
    reordered and trained on (lsm_gnn.sources.shard: both data planes, with the CPU engine): the
    misses are the window's first batch minus the lines resident and landed after this batch, so
    the reads are exactly the ones the next step makes; no decision changes. A timing setting only (docs/cache.md, "Read-ahead")."""
    engine: Literal[ENGINES] = "cpu"
    victim_buffer: VictimBufferConfig = VictimBufferConfig()

    @field_validator("policy")
    @classmethod
    def _known_policy(cls, v):
        """A registered name, or one the registry's resolver imports and registers here
        (`package.module:Class`, `path/to/file.py:Class`, an installed entry point's name): the
        value is kept as written, so a rank or job that re-parses the config resolves it again."""
        from lsm_gnn.cache.policies import policy_class

        try:
            found = policy_class(v)
        except InputError as e:
            raise ValueError(str(e)) from None
        if not found.configurable:
            raise ValueError(f"{v!r} is not a policy a config may name; expected one of {', '.join(policy_names())}")
        return v

    @model_validator(mode="after")
    def _one_capacity(self):
        if self.capacity_fraction is None and self.capacity_bytes is None:
            raise ValueError("set capacity_fraction or capacity_bytes")
        return self

    @property
    def horizon(self) -> int:
        """Future batches the policy reads: K (`lookahead`) for a long-lookahead policy (horizon),
        else W (`window`): lsm_gnn.cache.policies.lookahead_horizon, the one derivation."""
        from lsm_gnn.cache.policies import lookahead_horizon

        return lookahead_horizon(self)


class SamplerConfig(Section):
    fanouts: list[int] = Field(default_factory=lambda: [10, 15], min_length=1, max_length=8)
    batch_size: int = Field(1024, ge=1)
    shuffle: bool = True
    prefetch_batches: int = Field(2, ge=0, le=64)
    """Sampled batches kept ready beyond the lookahead window (sampling overlaps training)."""

    @field_validator("fanouts")
    @classmethod
    def _positive_fanouts(cls, v):
        if any(f == 0 or f < -1 for f in v):
            raise ValueError("fanouts must be positive (or -1 for all neighbours)")
        return v


class ModelConfig(Section):
    name: Literal["sage", "gcn", "gat", "rgcn", "rsage", "rgat"] = "sage"
    hidden: int = Field(256, ge=1, le=65536)
    heads: int = Field(4, ge=1, le=64)
    dropout: float = Field(0.2, ge=0.0, lt=1.0)


class TrainConfig(Section):
    epochs: int = Field(2, ge=1)
    lr: float = Field(0.01, gt=0.0)
    """Adam's learning rate: 0.01, the default of the authors' training script (dist_homogenous_train.py
    in github.com/jeongminpark417/COALA-GNN; the paper does not state its value)."""
    weight_decay: float = Field(0.0, ge=0.0)
    seed: int = Field(0, ge=0, le=SEED_MAX)
    """numpy's and torch's seed range (0..2**32-1; lsm_gnn.utils.seeds.SEED_MAX)."""
    device: Literal["cpu", "cuda"] = "cpu"
    warmup_iters: int = Field(0, ge=0)
    """Iterations run before the timed window starts (the paper's code used 100)."""
    timed_iters: int | None = Field(None, ge=1)
    """Time only this many iterations after the warm-up, then stop the epoch (None: whole epoch)."""
    eval: bool = True
    eval_nodes: int | None = Field(4096, ge=1)
    """Evaluate on a fixed seeded subset of this many validation/test nodes (None: the whole split)."""
    overlap_fetch: bool = True
    """Fetch the next batch's features in a thread while the current batch trains."""
    threads: int | None = Field(None, ge=1, le=65536)
    accelerator: Literal["real", "emulated"] = "real"
    """real: the model trains on train.device. emulated: each train step is a wait of the
    accelerator profile's step time for that batch (MLPerf Storage's emulated accelerators;
    lsm_gnn.accelerator): the data plane runs unchanged, nothing is trained, no accuracy is reported."""
    accelerator_profile: str = "a100"
    """The emulated accelerator: a packaged profile (a100, h200) or a YAML file in its schema."""
    accelerator_scale: float = Field(1.0, gt=0.0)
    """Multiplies the profile's step time (a sweep of slower or faster accelerators)."""

    @field_validator("accelerator_profile")
    @classmethod
    def _known_accelerator(cls, v):
        if v not in ACCELERATOR_PROFILES and not v.endswith((".yaml", ".yml")):
            raise ValueError(f"unknown accelerator profile; expected one of {', '.join(ACCELERATOR_PROFILES)} "
                             "or a .yaml path")
        return v


class DistributedConfig(Section):
    devices: int = Field(1, ge=1, le=64)
    mode: Literal["shared", "isolated"] = "shared"
    backend: Literal["auto", "gloo", "nccl"] = "auto"
    row_transport: Literal["auto", "shm", "collective"] = "auto"
    """How the shared cache's rows cross between CPU ranks (host data plane): shm (the owners'
    shared-memory outboxes, one host), collective (the gloo all_to_all), auto (shm where every
    rank maps the same /dev/shm). Device tensors always go through the collective (NCCL)."""
    timeout_s: float = Field(60.0, gt=0.0)
    master_addr: str = "127.0.0.1"
    master_port: int = Field(0, ge=0, le=65535)
    """0 picks a free port."""


class EmulationConfig(Section):
    time_scale: float = Field(1.0, gt=0.0, le=1000.0)
    """Time dilation S: every emulated storage device's rates are divided by S (its latencies
    multiplied by S) and every emulated accelerator's step multiplied by S, so the real CPU work
    looks S times faster; every reported time is divided back by S (docs/accelerators.md, "Time
    scale"). 1: no dilation."""
    host_speed: float | None = Field(None, gt=0.0, le=100.0)
    """f: the paper's host core's time relative to this machine's core (2: it takes twice as long).
    In the emulated testbed (storage.device: emulated) host stages are charged at S x f x their thread
    CPU time (lsm_gnn.storage.charge). None: the hardware profile's `cpu.host_time_factor`."""
    host_core: Literal["reference", "this"] = "this"
    """How a host stage's thread CPU time is read before S x f: `this`, as this core ran it; `reference`
    puts it at the reference core's speed (lsm_gnn.storage.charge.CoreSpeed: a probe in the charging
    thread, against lsm_gnn.testbed.CORE_PROBE_REF_S), so that a shared VM's core slowing down under
    its neighbours would not slow the emulated host. Not the default: on a quiet VM it did not narrow
    Dist-DGL's spread (docs/accelerators.md, "The reference core")."""
    hardware_profile: str = "paper"
    """The hardware profile (lsm_gnn/project/profiles: paper, h200x8, this-machine, or a .yaml path) whose
    links (pcie, nic) and host factor the emulated testbed charges stages with."""
    testbed: dict | None = None
    """Filled by the harness (baselines.harness.testbed_args) when storage.device is emulated: the
    time scale, f and the hardware profile's links the ranks charge their stages with (the ranks stand
    below the profiles' floor, so they receive the numbers, resolved once). Not set by hand."""


class OutputConfig(Section):
    record: str | None = None
    """Where the run record (JSON) is written; None: `lsm-gnn train` names
    results/runs/<UTC time>-<system>.json (lsm_gnn.cli.train), a library call writes none."""


class BaselineConfig(Section):
    """Comparator settings (baselines/: plain loaders and Dist-DGL; docs/baselines.md)."""

    page_cache_cap: bool = True
    """mmap loader: cap the page cache with a cgroup memory limit (else only drop it first)."""
    page_cache_budget_bytes: int | None = Field(None, ge=0, le=BYTES_MAX)
    """mmap page-cache budget; None: LSM-GNN's total feature memory (per-device budget x devices)."""
    partition_method: Literal["metis", "random"] = "metis"
    partition_dir: str | None = None
    """Keep Dist-DGL partitions here and reuse them (None: partition afresh in a temporary dir)."""
    servers: int = Field(1, ge=1, le=16)
    samplers: int = Field(0, ge=0, le=16)
    network: Literal["netns", "loopback"] = "netns"
    """netns: every emulated machine has its own network namespace and address (bytes measured)."""
    network_emulation: Literal["real", "emulated", "rate", "auto"] = "real"
    """real: the machines' veths as the kernel runs them. emulated: every machine's eth0 shaped with tc
    (netem delay, tbf rate) to `network_profile`'s NIC (baselines/distdgl/netem.py); needs netns and a
    kernel with sch_netem and sch_tbf (the run fails naming what is missing). rate: tbf alone, the
    delay left out and recorded with what it costs per epoch. auto: emulated where the kernel has
    sch_netem, else rate; the record says which."""
    network_profile: str = "paper"
    """The hardware profile whose `links.nic` the emulated network takes: a projection profile
    (lsm_gnn/project/profiles: paper, h200x8, this-machine) or a .yaml path."""
    trainer_threads: int = Field(1, ge=1, le=256)
    timeout_s: float = Field(900.0, gt=0.0)
    fault_die_at: dict[str, int] = Field(default_factory=dict)
    """Tests only: {trainer rank: iteration} at which that Dist-DGL trainer kills itself."""

    @field_validator("network_profile")
    @classmethod
    def _known_network_profile(cls, v):
        if v not in HARDWARE_PROFILES and not v.endswith((".yaml", ".yml")):
            raise ValueError(f"unknown hardware profile; expected one of {', '.join(HARDWARE_PROFILES)} or a .yaml path")
        return v

    @model_validator(mode="after")
    def _emulated_network_needs_namespaces(self):
        if self.network_emulation != "real" and self.network != "netns":
            raise ValueError(f"network_emulation: {self.network_emulation} shapes each machine's own eth0, which needs "
                             f"network: netns (found network: {self.network})")
        return self


class RunConfig(Section):
    dataset: DatasetConfig = DatasetConfig()
    storage: StorageConfig = StorageConfig()
    cache: CacheConfig = CacheConfig()
    sampler: SamplerConfig = SamplerConfig()
    model: ModelConfig = ModelConfig()
    train: TrainConfig = TrainConfig()
    distributed: DistributedConfig = DistributedConfig()
    emulation: EmulationConfig = EmulationConfig()
    output: OutputConfig = OutputConfig()
    baseline: BaselineConfig = BaselineConfig()


def _raise_config_error(source: str, err: ValidationError):
    first = err.errors()[0]
    key = ".".join(str(p) for p in first["loc"]) or "(root)"
    kind = first["type"]
    if kind == "extra_forbidden":
        problem = "unknown key"
    else:
        problem = f"{first['msg']} (found {shorten(first.get('input'))})"
    raise ConfigError(source, key, problem) from None


def parse_config(data: dict | None, source: str = "<config>") -> RunConfig:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(source, "(root)", f"expected a mapping, found {type(data).__name__}")
    try:
        return RunConfig.model_validate(data)
    except ValidationError as e:
        _raise_config_error(source, e)


def load_config(path: str | os.PathLike | None, overrides: list[str] | dict | None = None) -> RunConfig:
    """Load a YAML config file (None: defaults) and apply `key=value` overrides."""
    data: dict = {}
    source = "<defaults>"
    if path is not None:
        source = os.fspath(path)
        try:
            text = Path(path).read_text()
        except OSError as e:
            raise ConfigError(source, "(file)", f"cannot read: {e.strerror}") from None
        except UnicodeDecodeError as e:
            raise ConfigError(source, "(file)", f"not UTF-8 text: {e.reason} at byte {e.start}") from None
        data = load_yaml(text, source) or {}  # bounded: no expanding aliases, no duplicate keys
    if overrides:
        data = apply_overrides(data, overrides, source)
    return parse_config(data, source)


def config_to_dict(cfg: RunConfig) -> dict:
    return cfg.model_dump(mode="json")
