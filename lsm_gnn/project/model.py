"""The projection: per-iteration stage costs from a record's counts and a hardware profile, the
system's overlap rules, epoch time, ratios and the bottleneck. docs/projection.md is the
reference; every stage of the output carries its formula with the numbers put in.

Notation (per worker and iteration, lsm_gnn.project.counts.Counts): R rows requested, r row bytes,
S storage rows, IO storage reads, B_s storage bytes, V victim-buffer rows, P rows received from
peers, X exchange bytes of the worker, W workers (devices or trainers), n SSDs per device.

1. Stage costs (seconds; in brackets where each runs: the part of the testbed's table, `host` for
   the CPU; the output's `resource` is that part, `table_stages` the table's stages, `link` the link):
   train     = fixed_s + row_s x R + edge_s x E (compute.step, or compute.accelerator's)  [gpu | cpu]
               (lsm_gnn.accelerator.StepModel: the model the emulated accelerators wait; a record
               whose run waited one, projected on a CPU profile, keeps its own constants: the
               wait, no CPU)
   sample    = R / sample_rows_per_s                                             [gpu | cpu]
   storage   = max(F x IO / (n x iops), F x B_s / (n x bw), IO x latency / queue_depth)  [ssd]
               (F = W on a shared pool, whose workers read in step; else 1)
   io_cpu    = IO x io_cpu_s (reads the host issues)                             [cpu]
   cache     = GPU: (R - S - V) x r / hbm_bw;  CPU: R x cache_row_s              [gpu | cpu]
   pcie_in   = B_s / pcie_bw (BaM: the rows land in GPU memory)                  [pcie]
   victim    = V x r / pcie_bw (the PVP copy);  CPU: V x r / host_mem_bw         [pcie | cpu]
   exchange  = X / link_bw + latency; link = NVLink, else PCIe peer-to-peer;
               CPU: the gloo all-to-all (links.exchange), CPU work; with the shared-memory
               row transport the owner's copy into its outbox (links.host_memory)  [nvlink | pcie | cpu]
   reorder   = P x r / hbm_bw;  CPU: P x r / host_mem_bw                         [gpu | cpu]
   gather    = R x r / host_mem_bw (rows copied into the batch in host memory)   [cpu]
   h2d       = R x r / pcie_bw + latency (GPU profiles, loaders landing in host) [pcie]
   faults    = IO x (latency + (F - 1) / (n x iops)), IO = B_s / 4096: one fault at a time per
               worker, each queued behind the reads of the F - 1 other workers faulting on the
               same SSDs (F = W on a shared pool, else 1); + IO x fault_cpu_s      [ssd + cpu]
               or, when the profile has it for F processes, IO x fault_s (measured the loader's way)
   Dist-DGL, per trainer: rpc_sample = R / rpc_sample_rows_per_s + 2 x layers x nic latency;
   kv_pull = R x kvstore_row_s + remote / nic_bw + latency, remote = network bytes one machine
   sent per iteration / its trainers (measured; else kvstore bytes x (M-1)/M); allreduce =
   2 (W-1)/W x gradient bytes / nic_bw + 2 x latency. On a CPU profile (the machines emulated on
   one node) the network stages are CPU work.
   allreduce = 2 (W-1)/W x gradient bytes / link (DDP, W > 1; Dist-DGL: the NIC)  [cpu | nvlink | pcie]
2. Overlap rules: the stages of one lane run one after another; lanes run concurrently; the
   train lane of W > 1 devices ends with DDP's all-reduce.
   lsm:      [sample] | [exchange_ids, serve, exchange_rows, reorder] | [victim (PVP)] | [train]
             GPU: serve = max(storage, pcie_in, cache) (one kernel gathers hits while reads fly);
             CPU (lsm_gnn.sources.cached): serve = cache + max(0, max(storage, io_cpu) - hit_copy),
             hit_copy = (R - S) x r / host_mem_bw: the reads run while the hits are copied;
             with the read-ahead (cache.readahead), serve = cache and the reads,
             max(storage, io_cpu), are a lane of their own: [reads].
   isolated: as lsm without the exchanges and the reorder.
   direct:   [sample] | [serve = max(storage, io_cpu + gather), h2d] | [train]
   mmap:     [sample] | [faults, gather, h2d] | [train]     memory: [sample] | [gather, h2d] | [train]
   distdgl:  [rpc_sample, kv_pull, h2d, train, allreduce] per trainer (samplers > 0: rpc_sample
             in a lane of its own).
   A record with overlap_fetch false (mmap in the harness) runs fetch and train in one lane.
3. Floors (shared resources): ssd = every worker's reads through a shared SSD pool; pcie = one
   device's bytes over its link (storage + victim + h2d, + exchange without NVLink) / pcie_bw;
   nic = one machine's bytes / nic_bw; cpu = all CPU seconds of a node / its cores; Dist-DGL's
   server = rows one machine sends x kvstore_server_row_s / its servers (each answers one request
   at a time; a profile without the figure has no such floor); with it, kv_pull also waits for the
   remote server: (q + 1) / 2 x remote / r x kvstore_server_row_s, q = trainers per machine /
   servers per machine (its queue of the T trainers' requests, on average).
   Every stage names the testbed table's stage(s) it is (TABLE_STAGES) and its part comes from
   that table (lsm_gnn.testbed.part_of), `host` for every CPU stage of a CPU-only profile.
   W > 1: a stage `straggler` = (rho - 1) x the iteration before the all-reduce, just before the
   all-reduce (rho: the slowest worker's over the mean, Counts.straggler).
4. CPU contention: a CPU stage runs at 1/k of a core, k = max(1, (L + servers) / cores), L = the
   busy cores the node's workers ask for: each lane counts its CPU seconds over the longest lane's
   seconds (at most 1), summed over lanes and workers (Dist-DGL's servers also run beside the
   trainers, each counted as busy). Device time (SSD, links) is not stretched.
5. iteration = max(longest lane, floors); epoch = iteration x iterations per epoch; the
   bottleneck is the lane (and its largest stage) or the floor that sets the maximum.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lsm_gnn.accelerator import StepModel
from lsm_gnn.project.counts import PAGE, Counts
from lsm_gnn.project.profiles import Profile
from lsm_gnn.storage.device_model import SSDModel, reads_seconds
from lsm_gnn.testbed import part_of

NUM_CLASSES = 19        # classes of the output layer for the gradient size (IGB and the synthetic graphs: 19)


@dataclass
class Stage:
    name: str
    seconds: float          # on a dedicated resource (before CPU contention)
    formula: str
    cpu_seconds: float = 0.0  # the CPU part of `seconds` (stretched under contention)
    link: str | None = None   # a link stage: which of the profile's links (links.<link>) it crosses
    split: dict | None = None  # a stage of several table stages: seconds of each (its part: the largest's)
    resource: str = ""      # the part that runs it (lsm_gnn.testbed.PARTS), from the table: `_place`
    table: tuple = ()       # the testbed table's stage(s) it is
    parts: list | None = None   # a max(...) stage: its concurrent parts
    hidden: "Stage | None" = None  # storage_wait: the copy that hides the reads


# Each projected stage as the stage(s) of the testbed's one table (lsm_gnn/testbed.py) it is: its part
# is the table's (`part_of(system, stage)`); a projected stage without an entry here, or whose table
# stage the system lacks, is an error. A max(...) stage (serve, reads, storage_wait) is its parts'.
TABLE_STAGES: dict[str, tuple[str, ...]] = {
    "sample": ("sample",),
    "rpc_sample": ("sample", "sample_rpc"),      # Dist-DGL: host sampling + one NIC round trip per RPC
    "exchange_ids": ("exchange_ids",),
    "storage": ("fetch_storage",),
    "faults": ("fetch_storage",),
    "fault_cpu": ("page_cache",),
    "io_cpu": ("read_submit",),
    "pcie_in": ("storage_to_device",),
    "h2d_storage": ("storage_to_device",),
    "cache": ("fetch_cache",),
    "hit_copy": ("fetch_cache",),
    "gather": ("fetch_cache",),
    "io_cpu+gather": ("read_submit", "fetch_cache"),
    "victim": ("fetch_victim",),
    "exchange_rows": ("exchange_rows",),
    "reorder": ("reorder",),
    "h2d": ("copy_to_gpu",),
    "kv_pull": ("exchange_rows", "pull_rpc", "server_pull"),  # Dist-DGL: the trainer's KVStore work, the NIC,
                                                              # the remote server's handler
    "train": ("train",),
    "allreduce": ("sync",),
    "straggler": ("sync",),                      # the wait for the slowest worker, inside the sync
}


@dataclass
class Lane:
    name: str
    stages: list            # list[Stage | tuple("max", name, [Stage...])]
    seconds: float = 0.0
    cpu_seconds: float = 0.0


@dataclass
class Projection:
    system: str
    profile: str
    iteration_s: float
    epoch_s: float
    iterations_per_epoch: int
    bottleneck: str
    bottleneck_stage: str
    contention: float
    lanes: dict
    floors: dict
    stages: dict
    measured_epoch_s: float | None = None
    hidden_fetch_fraction: float | None = None
    notes: list = field(default_factory=list)

    def as_dict(self) -> dict:
        d = {"system": self.system, "profile": self.profile, "iteration_s": self.iteration_s,
             "epoch_s": self.epoch_s, "iterations_per_epoch": self.iterations_per_epoch,
             "bottleneck": self.bottleneck, "bottleneck_stage": self.bottleneck_stage,
             "cpu_contention": self.contention, "hidden_fetch_fraction": self.hidden_fetch_fraction,
             "lanes": self.lanes, "floors": self.floors,
             "stages": self.stages, "notes": self.notes}
        if self.measured_epoch_s is not None:
            d["measured_epoch_s"] = self.measured_epoch_s
            d["error"] = self.epoch_s / self.measured_epoch_s - 1.0
        return d


# ---- helpers --------------------------------------------------------------------------------------
def _fmt(x: float) -> str:
    return f"{x:.4g}"


def gradient_bytes(c: Counts, classes: int = NUM_CLASSES) -> float:
    """float32 gradient of a GraphSAGE-like model: per layer a self and a neighbour weight + bias."""
    d_in, h, L = c.row_bytes / 4, c.hidden, max(1, len(c.fanouts))
    dims = [d_in] + [h] * (L - 1) + [classes]
    params = sum(2 * a * b + b for a, b in zip(dims[:-1], dims[1:]))
    return 4.0 * params


def _ssd(p: Profile) -> SSDModel:
    """The profile's SSD in the storage device model (lsm_gnn.storage.device_model): the one model
    the emulated storage device paces by and bench compare's floor divides by."""
    st = p.storage
    return SSDModel(iops=st.ssd_iops, bandwidth=st.ssd_bandwidth, latency_s=st.latency_s)


def _storage(c: Counts, p: Profile, ios: float, nbytes: float, qd: int, name="storage") -> Stage:
    """One worker's reads on the SSDs that serve it: the IOPS, bandwidth or latency bound
    (device_model.reads_seconds). On a shared pool the W workers read at the same time (their
    collectives keep them in step: the all-to-all, DDP's all-reduce), so a worker's reads are done
    when the pool has served all W workers' reads: W x its reads / the pool. On the VM LSM-GNN's 2
    ranks (synthetic-small, batch 128, 2026-12-01) waited 83 ms per iteration for 3,432 reads each,
    where 3,432 / 76k IOPS is 45 ms and 2 x 3,432 / 76k is 90 ms."""
    st = p.storage
    n = st.ssds_per_device
    W = c.workers if st.shared else 1
    t, which = reads_seconds(_ssd(p), ios, nbytes, ssds=n, queue_depth=qd, sharers=W)
    iops_t = W * ios / (n * st.ssd_iops)
    bw_t = W * nbytes / (n * st.ssd_bandwidth)
    lat_t = ios * st.latency_s / qd
    f = (f"max({W} x IO {_fmt(ios)} / ({_fmt(n)} SSD x {_fmt(st.ssd_iops)} IOPS) = {_fmt(iops_t)}, "
         f"{W} x B {_fmt(nbytes)} / ({_fmt(n)} x {_fmt(st.ssd_bandwidth)} B/s) = {_fmt(bw_t)}, "
         f"IO x {_fmt(st.latency_s)} s / QD {qd} = {_fmt(lat_t)}) -> {which}")
    return Stage(name, t, f)


def _measured_fault(c: Counts, p: Profile) -> bool:
    """Whether the profile's loader-measured fault (`storage.fault_s`) applies: it was measured with
    as many processes faulting at once as this run has workers faulting on the same SSDs."""
    faulting = c.workers if p.storage.shared else 1
    return p.storage.fault_s is not None and p.storage.fault_processes == faulting


def _faults(c: Counts, p: Profile, faults: float) -> Stage:
    """Synchronous page faults: one read in flight per worker. Each waits for its own read and for
    the reads the other workers on the same SSDs have queued ahead of it, one per worker, each
    taking 1 / IOPS of the device. On the VM fio's 4 KiB QD1 reads take 50 us with one job and
    68 us with two (lsm-gnn bench storage: fio.qd1, fio.qd1_jobs2): 50 + 1 / 75k IOPS = 63."""
    st = p.storage
    n = st.ssds_per_device
    faulting = c.workers if st.shared else 1
    if _measured_fault(c, p):  # page cache work included
        return Stage("faults", faults * st.fault_s,
                     f"faults {_fmt(faults)} x {_fmt(st.fault_s)} s (measured with {faulting} processes faulting)")
    others = faulting - 1
    per = st.latency_s + others / (n * st.ssd_iops)
    t = faults * per
    f = (f"faults {_fmt(faults)} x (latency {_fmt(st.latency_s)} s + {others} other workers / "
         f"({_fmt(n)} SSD x {_fmt(st.ssd_iops)} IOPS)) = {_fmt(faults)} x {_fmt(per)} s")
    return Stage("faults", t, f)


def _ssd_floor(c: Counts, p: Profile, ios: float, nbytes: float) -> dict | None:
    """All workers' reads through a shared SSD pool (per-device SSDs: the lane already holds it)."""
    st = p.storage
    if not st.shared or ios <= 0:
        return None
    W, n = c.workers, st.ssds_per_device
    t, _ = reads_seconds(_ssd(p), ios, nbytes, ssds=n, sharers=W)  # the caps only: no queue of its own
    return {"seconds": t, "formula": f"max({W} workers x IO {_fmt(ios)} / ({_fmt(n)} x {_fmt(st.ssd_iops)} IOPS), "
                                     f"{W} x B {_fmt(nbytes)} / ({_fmt(n)} x {_fmt(st.ssd_bandwidth)} B/s))"}


def _cpu(name: str, seconds: float, formula: str) -> Stage:
    return Stage(name, seconds, formula, cpu_seconds=seconds)


def _on(p: Profile, name: str, seconds: float, formula: str) -> Stage:
    """A stage that runs on the GPU on GPU profiles and on the CPU otherwise (CPU work there)."""
    if p.cpu_only:
        return _cpu(name, seconds, formula)
    return Stage(name, seconds, formula)


def _link(p: Profile, name: str, nbytes: float, link, which: str) -> Stage:
    """`nbytes` over the profile's link `which` (links.<which>); on a CPU profile the gloo exchange and
    host-memory copies are CPU work."""
    t = nbytes / link.bandwidth + link.latency_s
    f = f"{_fmt(nbytes)} B / {_fmt(link.bandwidth)} B/s + {_fmt(link.latency_s)} s"
    st = _cpu(name, t, f) if (p.cpu_only and which in ("exchange", "host_memory")) else Stage(name, t, f)
    st.link = which
    return st


def _max(name: str, parts: list) -> Stage:
    """Concurrent parts of one step (storage reads in flight while the CPU works): the longest."""
    parts = [s for s in parts if s is not None]
    top = max(parts, key=lambda s: s.seconds)
    f = "max(" + ", ".join(f"{s.name} {_fmt(s.seconds)}" for s in parts) + ")"
    st = Stage(name, top.seconds, f, cpu_seconds=max((s.cpu_seconds for s in parts), default=0.0))
    st.parts = parts
    return st


def _waited(c: Counts, p: Profile) -> bool:
    """The record's run waited an emulated accelerator and the profile is the machine it ran on:
    the train step is that wait (no CPU, no contention), not the profile's step."""
    return p.cpu_only and c.emulated_step is not None


def _train(c: Counts, p: Profile) -> Stage:
    edges = c.edges or 0.0
    if _waited(c, p):
        sm = StepModel(**c.emulated_step)
        return Stage("train", sm.seconds(c.rows, edges),
                     f"emulated {c.accelerator_profile}: {sm.formula(c.rows, edges)}")
    sm = p.compute.step
    f = sm.formula(c.rows, edges) + ("" if c.edges is not None else " (E not recorded: 0)")
    return _on(p, "train", sm.seconds(c.rows, edges), f)


def _sample(c: Counts, p: Profile) -> Stage:
    return _on(p, "sample", c.rows / p.compute.sample_rows_per_s,
               f"R {_fmt(c.rows)} / {_fmt(p.compute.sample_rows_per_s)} rows/s")


def _gather(c: Counts, p: Profile, rows: float, name="gather") -> Stage:
    b = rows * c.row_bytes
    bw = p.links.host_memory.bandwidth
    return _cpu(name, b / bw, f"{_fmt(rows)} rows x {c.row_bytes} B / {_fmt(bw)} B/s")


def _h2d(c: Counts, p: Profile):
    if p.cpu_only:
        return None
    return _link(p, "h2d", c.h2d_bytes, p.links.pcie, "pcie")


# ---- stage graphs per system ---------------------------------------------------------------------
def distdgl_round_trips(layers: int, world: int) -> dict:
    """Network round trips of one Dist-DGL trainer iteration, per stage: the RPC sampling two per
    layer, the KVStore pull one, the gradient all-reduce two (W > 1; an emulated step's trainers
    still meet). The projection charges each a NIC latency, and a run whose emulated link lacks
    the delay (baselines/distdgl/netem.py: rate) lacks as many."""
    return {"rpc_sample": 2 * max(1, layers), "kv_pull": 1, "allreduce": 2 if world > 1 else 0}


def _lanes(c: Counts, p: Profile) -> tuple[list[Lane], dict]:
    """The system's lanes (overlap rules) and its per-node resource demands for the floors."""
    s, r, W = c.system, c.row_bytes, c.workers
    gpu = not p.cpu_only
    sample, train = _sample(c, p), _train(c, p)
    demand = {"pcie_bytes": 0.0, "nic_bytes": 0.0, "ssd": None}
    lanes: list[Lane] = []

    if s in ("lsm", "isolated"):
        read_lane = None
        st = _storage(c, p, c.storage_io_ops, c.storage_bytes, p.storage.queue_depth)
        demand["ssd"] = _ssd_floor(c, p, c.storage_io_ops, c.storage_bytes)
        if gpu:
            # one GPU kernel: the hits are gathered while the reads are in flight (BaM)
            served = max(0.0, c.rows - c.storage_rows - c.victim_hits)
            cache = Stage("cache", served * r / p.compute.memory_bandwidth,
                          f"(R - S - V) {_fmt(served)} x {r} B / {_fmt(p.compute.memory_bandwidth)} B/s")
            parts = [st, cache]
            if p.storage.gpu_initiated:
                parts.append(_link(p, "pcie_in", c.storage_bytes, p.links.pcie, "pcie"))
                demand["pcie_bytes"] += c.storage_bytes
            else:
                # host-issued reads (no BaM): the rows land in host memory, then cross PCIe
                parts.append(_cpu("io_cpu", c.storage_io_ops * p.cpu.io_cpu_s,
                                  f"IO {_fmt(c.storage_io_ops)} x {_fmt(p.cpu.io_cpu_s)} s"))
                parts.append(_link(p, "h2d_storage", c.storage_bytes, p.links.pcie, "pcie"))
                demand["pcie_bytes"] += c.storage_bytes
            if c.readahead:
                # the record's data plane read ahead (cache.readahead: the CPU engine's, which the
                # emulated testbed runs; the GPU engine does not, lsm_gnn.sources.cached_device):
                # batch t+1's reads, and their copy into the device, run beside all of iteration t:
                # a lane of their own, as on the CPU
                read_lane = Lane("reads", [_max("reads", [x for x in parts if x is not cache])])
                fetch_serve = [cache]
            else:
                fetch_serve = [_max("serve", parts)]
        else:
            cache = _cpu("cache", c.rows * p.cpu.cache_row_s, f"R {_fmt(c.rows)} x {_fmt(p.cpu.cache_row_s)} s")
            io_cpu = _cpu("io_cpu", c.storage_io_ops * p.cpu.io_cpu_s,
                          f"IO {_fmt(c.storage_io_ops)} x {_fmt(p.cpu.io_cpu_s)} s")
            reads = _max("reads", [st, io_cpu])
            if c.readahead:
                # lsm_gnn.sources.cached's read-ahead: batch t+1's reads are queued on the reader
                # thread as soon as batch t is decided, so they run beside all the rest of the
                # iteration (copies, exchange, reorder, train step): a lane of their own
                read_lane = Lane("reads", [reads])
                fetch_serve = [cache]
            else:
                # without it: engine step, then the reads (reader thread) run while the hits are
                # copied, then the misses are placed: only the hit copy hides the reads
                hit_copy = _gather(c, p, max(0.0, c.rows - c.storage_rows), "hit_copy")
                exposed = Stage("storage_wait", max(0.0, reads.seconds - hit_copy.seconds),
                                f"max(0, reads {_fmt(reads.seconds)} - hit copy {_fmt(hit_copy.seconds)} "
                                f"({hit_copy.formula}))")
                exposed.cpu_seconds = io_cpu.seconds
                exposed.parts = [st, io_cpu]
                exposed.hidden = hit_copy
                fetch_serve = [cache, exposed]
        fetch = []
        if s == "lsm" and W > 1:
            # CPU ranks whose rows went through shared-memory outboxes: the rows are copied in host
            # memory (the owner's write; the requester's read is the reorder below)
            cpu_link = (p.links.host_memory, "host_memory") if c.row_transport == "shm" \
                else (p.links.exchange, "exchange")
            link, res = ((p.links.nvlink, "nvlink") if p.links.nvlink else (p.links.pcie, "pcie")) if gpu \
                else cpu_link
            fetch.append(_link(p, "exchange_ids", 0.0, link, res))
            fetch += fetch_serve
            fetch.append(_link(p, "exchange_rows", c.exchange_bytes, link, res))
            if gpu:
                fetch.append(Stage("reorder", c.peer_rows * r / p.compute.memory_bandwidth,
                                   f"P {_fmt(c.peer_rows)} x {r} B / {_fmt(p.compute.memory_bandwidth)} B/s"))
            else:
                fetch.append(_gather(c, p, c.peer_rows, "reorder"))
            if gpu and not p.links.nvlink:
                demand["pcie_bytes"] += c.exchange_bytes
        else:
            fetch += fetch_serve
        victim = (_link(p, "victim", c.victim_hits * r, p.links.pcie, "pcie") if gpu
                  else _gather(c, p, c.victim_hits, "victim"))
        if gpu:
            demand["pcie_bytes"] += c.victim_hits * r
        lanes += [Lane("sample", [sample]), Lane("fetch", fetch), Lane("pvp", [victim])]
        lanes += [read_lane] if read_lane is not None else []
        lanes = _train_lane(lanes, train, c, p)
    elif s in ("direct", "buffered"):
        st = _storage(c, p, c.storage_io_ops, c.storage_bytes, p.storage.queue_depth)
        demand["ssd"] = _ssd_floor(c, p, c.storage_io_ops, c.storage_bytes)
        io_cpu = _cpu("io_cpu", c.storage_io_ops * p.cpu.io_cpu_s, f"IO {_fmt(c.storage_io_ops)} x {_fmt(p.cpu.io_cpu_s)} s")
        g = _gather(c, p, c.rows)
        cpu_part = _cpu("io_cpu+gather", io_cpu.seconds + g.seconds, f"{io_cpu.formula} + {g.formula}")
        fetch = [_max("serve", [st, cpu_part])]
        if gpu:
            fetch.append(_h2d(c, p))
            demand["pcie_bytes"] += c.h2d_bytes
        lanes += [Lane("sample", [sample]), Lane("fetch", fetch)]
        lanes = _train_lane(lanes, train, c, p)
    elif s == "mmap":
        faults = c.storage_bytes / PAGE
        st = _faults(c, p, faults)
        demand["ssd"] = _ssd_floor(c, p, faults, c.storage_bytes)
        cpu_s = 0.0 if _measured_fault(c, p) else p.cpu.fault_cpu_s  # a measured fault includes it
        fc = _cpu("fault_cpu", faults * cpu_s, f"faults {_fmt(faults)} x {_fmt(cpu_s)} s")
        fetch = [st, fc, _gather(c, p, c.rows)]
        if gpu:
            fetch.append(_h2d(c, p))
            demand["pcie_bytes"] += c.h2d_bytes
        lanes += [Lane("sample", [sample]), Lane("fetch", fetch)]
        lanes = _train_lane(lanes, train, c, p)
    elif s == "memory":
        fetch = [_gather(c, p, c.rows)]
        if gpu:
            fetch.append(_h2d(c, p))
            demand["pcie_bytes"] += c.h2d_bytes
        lanes += [Lane("sample", [sample]), Lane("fetch", fetch)]
        lanes = _train_lane(lanes, train, c, p)
    elif s == "distdgl":
        nic = p.links.nic
        T = max(1, W // max(1, c.machines))
        layers = max(1, len(c.fanouts))
        trips = distdgl_round_trips(layers, W)
        rs = _cpu("rpc_sample", c.rows / p.cpu.rpc_sample_rows_per_s + trips["rpc_sample"] * nic.latency_s,
                  f"R {_fmt(c.rows)} / {_fmt(p.cpu.rpc_sample_rows_per_s)} rows/s + 2 x {layers} x {_fmt(nic.latency_s)} s")
        rs.cpu_seconds = c.rows / p.cpu.rpc_sample_rows_per_s
        rs.split = {"sample": rs.cpu_seconds, "sample_rpc": trips["rpc_sample"] * nic.latency_s}
        if c.network_bytes_per_machine is not None:
            remote = c.network_bytes_per_machine / T
            rsrc = f"network bytes per machine {_fmt(c.network_bytes_per_machine)} / {T} trainers"
        else:
            remote = c.kvstore_bytes * (c.machines - 1) / max(1, c.machines)
            rsrc = f"K {_fmt(c.kvstore_bytes)} x (M-1)/M"
        sw = c.rows * p.cpu.kvstore_row_s
        net = remote / nic.bandwidth + trips["kv_pull"] * nic.latency_s
        # the remote server's handler for this trainer's rows, behind the requests of the other
        # trainers queued on it: a server answers one request at a time, the T trainers of a machine
        # ask at once, so on average (q + 1) / 2 requests, q = T / servers per machine (the slowest
        # trainer's longer wait is the straggler's); kvstore_server_row_s 0: not modelled
        ksr, per = p.cpu.kvstore_server_row_s, max(1, c.servers // max(1, c.machines))
        q = -(-T // per)
        srv = (q + 1) / 2 * remote / r * ksr if (ksr > 0 and c.machines > 1) else 0.0
        emulated = p.cpu_only  # machines emulated on one node: the "network" is the kernel's copies
        pull = Stage("kv_pull", sw + net + srv,
                     f"R {_fmt(c.rows)} x {_fmt(p.cpu.kvstore_row_s)} s + remote {_fmt(remote)} B ({rsrc}) / "
                     f"{_fmt(nic.bandwidth)} B/s + {_fmt(nic.latency_s)} s"
                     + (f" + the remote server: ({q} + 1) / 2 requests x {_fmt(remote / r)} rows x {_fmt(ksr)} s"
                        if srv else ""),
                     cpu_seconds=sw + (net if emulated else 0.0),
                     split={"exchange_rows": sw, "pull_rpc": net, "server_pull": srv})
        gb = gradient_bytes(c)
        ar_t = 2 * (W - 1) / W * gb / nic.bandwidth + trips["allreduce"] * nic.latency_s if W > 1 else 0.0
        if _waited(c, p):  # an emulated step moves no gradient: the trainers only meet (the record's sync stage)
            ar_t = trips["allreduce"] * nic.latency_s
        ar = Stage("allreduce", ar_t,
                   f"2 x ({W}-1)/{W} x {_fmt(gb)} B / {_fmt(nic.bandwidth)} B/s + 2 x {_fmt(nic.latency_s)} s",
                   cpu_seconds=ar_t if emulated else 0.0)
        seq = [pull] + ([_h2d(c, p)] if gpu else []) + [train, ar]
        if gpu:
            demand["pcie_bytes"] += c.h2d_bytes
        sent = c.network_bytes_per_machine if c.network_bytes_per_machine is not None else remote * T
        demand["nic_bytes"] = sent + 2 * (W - 1) / W * gb * T
        ksr = p.cpu.kvstore_server_row_s
        if ksr > 0:
            # each machine's servers answer the other machines' pulls one request at a time
            per = max(1, c.servers // max(1, c.machines))
            rows = sent / r
            demand["server"] = {"seconds": rows * ksr / per,
                                "formula": f"rows sent per machine {_fmt(rows)} x {_fmt(ksr)} s / {per} server(s)"}
        if c.distdgl_samplers > 0:
            lanes += [Lane("sample", [rs]), Lane("trainer", seq)]
        else:
            lanes += [Lane("trainer", [rs] + seq)]
    else:
        raise ValueError(f"no projection model for system {s!r}")
    for ln in lanes:
        ln.stages = [x for x in ln.stages if x is not None]
        for st in ln.stages:
            _place(st, c, p)
    return lanes, demand


def _place(st: Stage, c: Counts, p: Profile) -> None:
    """Set the stage's table stages and its part from the testbed's table (lsm_gnn.testbed.part_of);
    a max(...) stage takes its longest part's. On a CPU profile every part but the SSD (and an
    emulated accelerator's wait) is this machine's CPU: `host`."""
    if st.parts:
        for x in st.parts:
            _place(x, c, p)
        if st.hidden is not None:
            _place(st.hidden, c, p)
        top = max(st.parts, key=lambda x: x.seconds)
        st.table = tuple(dict.fromkeys(t for x in st.parts for t in x.table))
        st.resource = top.resource
        return
    table = TABLE_STAGES.get(st.name)
    if table is None:
        raise ValueError(f"the projected stage {st.name!r} names no stage of the testbed's table "
                         "(lsm_gnn/project/model.py TABLE_STAGES)")
    parts = {t: part_of(c.system, t).part for t in table}  # an InputError names a stage the system lacks
    main = max(st.split, key=st.split.get) if st.split else table[0]
    part = parts[main]
    if p.cpu_only and part not in ("ssd", "accelerator"):
        part = "host"
    if part == "accelerator" and p.cpu_only and not _waited(c, p):
        part = "host"
    st.table, st.resource = table, part


def _ddp_allreduce(c: Counts, p: Profile) -> Stage | None:
    """DDP's gradient all-reduce after every backward pass of W > 1 workers (ring: each sends and
    receives 2 (W-1)/W of the gradient): gloo on a CPU profile (CPU work, links.exchange), NVLink or
    else PCIe on a GPU one. On the VM: 2.1 MB of GraphSAGE gradient in about 5.6 ms per step."""
    if c.workers <= 1:
        return None
    gb = gradient_bytes(c)
    nbytes = 2 * (c.workers - 1) / c.workers * gb
    if _waited(c, p):  # an emulated step moves no gradient: the ranks only meet (the record's sync stage)
        return _link(p, "allreduce", 0.0, p.links.exchange, "exchange")
    if p.cpu_only:
        return _link(p, "allreduce", nbytes, p.links.exchange, "exchange")
    link, res = (p.links.nvlink, "nvlink") if p.links.nvlink else (p.links.pcie, "pcie")
    return _link(p, "allreduce", nbytes, link, res)


def _train_lane(lanes: list[Lane], train: Stage, c: Counts, p: Profile) -> list[Lane]:
    step = [train] + [x for x in (_ddp_allreduce(c, p),) if x is not None]
    if c.overlap_fetch:
        return lanes + [Lane("train", step)]
    out = [ln for ln in lanes if ln.name != "fetch"]
    fetch = next(ln for ln in lanes if ln.name == "fetch")
    return out + [Lane("fetch+train", fetch.stages + step)]


def _stage_cpu(st: Stage) -> float:
    """The CPU part of a stage (every constructor sets it: a pure CPU stage is all CPU)."""
    return st.cpu_seconds


def project(c: Counts, p: Profile) -> Projection:
    """Project one record's counts onto one profile."""
    lanes, demand = _lanes(c, p)
    for ln in lanes:
        ln.seconds = sum(st.seconds for st in ln.stages)
        ln.cpu_seconds = sum(_stage_cpu(st) for st in ln.stages)
    longest = max(ln.seconds for ln in lanes)
    # workers whose threads share one node's cores (Dist-DGL on an emulated cluster: all of them)
    nodes = 1 if (p.cpu_only or c.system != "distdgl") else max(1, c.machines)
    per_node = max(1, c.workers // nodes)
    # each lane keeps a core busy for its CPU seconds out of the iteration (the longest lane)
    busy = sum(min(1.0, ln.cpu_seconds / longest) for ln in lanes) if longest > 0 else 0.0
    # Dist-DGL's servers sample and serve pulls for every trainer, concurrently with the trainers
    servers = c.servers // nodes if c.system == "distdgl" else 0
    k = max(1.0, (busy * per_node + servers) / p.cpu.cores)

    for ln in lanes:
        ln.seconds = sum(_stretched(st, k) for st in ln.stages)
    _wait_for_the_slowest(lanes, c, p, k)
    lane_out = {ln.name: {"seconds": ln.seconds, "stages": [st.name for st in ln.stages]} for ln in lanes}

    floors = {}
    if demand.get("ssd"):
        floors["ssd"] = demand["ssd"]
    total_cpu = sum(ln.cpu_seconds for ln in lanes) * per_node
    floors["cpu"] = {"seconds": total_cpu / p.cpu.cores,
                     "formula": f"{_fmt(total_cpu)} CPU s on the node / {p.cpu.cores} cores"}
    if not p.cpu_only and demand["pcie_bytes"] > 0:
        floors["pcie"] = {"seconds": demand["pcie_bytes"] / p.links.pcie.bandwidth,
                          "formula": f"{_fmt(demand['pcie_bytes'])} B / {_fmt(p.links.pcie.bandwidth)} B/s"}
    if demand.get("server"):
        floors["server"] = demand["server"]
    if c.system == "distdgl" and not p.cpu_only and demand["nic_bytes"] > 0:
        floors["nic"] = {"seconds": demand["nic_bytes"] / p.links.nic.bandwidth,
                         "formula": f"{_fmt(demand['nic_bytes'])} B per machine / {_fmt(p.links.nic.bandwidth)} B/s"}

    best_lane = max(lanes, key=lambda ln: ln.seconds)
    it, bott = best_lane.seconds, f"lane:{best_lane.name}"
    for name, fl in floors.items():
        if fl["seconds"] > it:
            it, bott = fl["seconds"], f"floor:{name}"
    if bott.startswith("lane:"):
        top = max(best_lane.stages, key=lambda st: _stretched(st, k))
        stage = top.name
        if top.parts:
            inner = max(top.parts, key=lambda st: _stretched(st, k))
            stage = f"{top.name}: {inner.name}"
    else:
        stage = bott.split(":", 1)[1]

    stages = {}
    for ln in lanes:
        for st in ln.stages:
            stages[st.name] = {"seconds": st.seconds, "resource": st.resource, "table_stages": list(st.table),
                               "lane": ln.name, "effective_s": _stretched(st, k), "formula": st.formula,
                               **({"link": st.link} if st.link else {})}
            for part in st.parts or []:
                stages[f"{st.name}.{part.name}"] = {"seconds": part.seconds, "resource": part.resource,
                                                    "table_stages": list(part.table), "lane": ln.name,
                                                    "formula": part.formula, **({"link": part.link} if part.link else {})}
    P = c.iterations_per_epoch
    fetch_l = next((ln for ln in lanes if ln.name == "fetch"), None)
    train_l = next((ln for ln in lanes if ln.name == "train"), None)
    hidden = None
    if fetch_l is not None and fetch_l.seconds > 0:
        # the share of the fetch lane hidden behind the train step (1 - wait / fetch)
        hidden = 0.0 if train_l is None else min(1.0, train_l.seconds / fetch_l.seconds)
    return Projection(hidden_fetch_fraction=hidden, system=c.system, profile=p.name, iteration_s=it, epoch_s=it * P, iterations_per_epoch=P,
                      bottleneck=bott, bottleneck_stage=stage, contention=k, lanes=lane_out, floors=floors,
                      stages=stages, measured_epoch_s=c.measured.get("epoch_steady_s") if c.measured else None)


def _wait_for_the_slowest(lanes: list[Lane], c: Counts, p: Profile, k: float) -> None:
    """W > 1 workers: the all-reduce starts when the slowest worker has finished its iteration, so
    every worker waits (rho - 1) x the iteration before the all-reduce, rho = the slowest worker's
    over the mean (Counts.straggler: the record's per-worker times, else the stated default). A
    stage `straggler` just before the all-reduce, in its lane; the iteration before the all-reduce
    is the longest lane without the all-reduce. Dist-DGL's trainers meet only there (24-30 % of an
    emulated Dist-DGL iteration was this wait, issue 43); lsm-gnn's devices also meet at every
    exchange, which keeps rho near 1."""
    if c.workers <= 1:
        return
    home = next((ln for ln in lanes if any(st.name == "allreduce" for st in ln.stages)), None)
    if home is None:
        return
    ar = sum(_stretched(st, k) for st in home.stages if st.name == "allreduce")
    pre = max(ln.seconds - (ar if ln is home else 0.0) for ln in lanes)
    rho = c.straggler
    wait = max(0.0, rho - 1.0) * pre
    st = Stage("straggler", wait, f"(rho {rho:.4g} - 1) x iteration before the all-reduce {_fmt(pre)} s "
                                  f"(rho: {c.straggler_from})")
    _place(st, c, p)
    at = next(i for i, x in enumerate(home.stages) if x.name == "allreduce")
    home.stages.insert(at, st)
    home.seconds += wait


def _stretched(st: Stage, k: float) -> float:
    """A stage's time when its CPU part runs at 1/k of a core. Device time is not stretched; in a
    `max(...)` stage the CPU part and the device part overlap."""
    if k == 1.0:
        return st.seconds
    parts = st.parts
    if parts:
        t = max(_stretched(x, k) for x in parts)
        hidden = st.hidden
        return t if hidden is None else max(0.0, t - _stretched(hidden, k))
    cpu = _stage_cpu(st)
    return st.seconds + (k - 1.0) * cpu


# ---- many systems ---------------------------------------------------------------------------------
def ratios(projections: dict) -> dict:
    """`{system}_vs_lsm_epoch` = epoch(system) / epoch(lsm), the convention of `bench compare`."""
    base = projections.get("lsm")
    if base is None:
        return {}
    return {f"{s}_vs_lsm_epoch": pr.epoch_s / base.epoch_s for s, pr in projections.items() if s != "lsm"}


def project_all(counts: list[Counts], p: Profile) -> dict:
    out = {}
    for c in counts:
        if c.system in out:
            raise ValueError(f"two records of system {c.system!r} ({c.source})")
        out[c.system] = project(c, p)
    return out


CLAIM_SYSTEMS = ("lsm", "distdgl")
"""The systems claim (a) compares (Dist-DGL against LSM-GNN): the default gate of `validate`."""


def validate(counts: list[Counts], p: Profile, tolerance: float = 0.20, systems=CLAIM_SYSTEMS) -> dict:
    """Projected against measured steady epoch per system. Every system is reported; the gate is
    taken over `systems` (the systems a claim compares; None: all): `max_abs_error` and `ok` are
    theirs (`ok` False when none of them has a measured epoch), `max_abs_error_all` every system's."""
    rows = {}
    for c in counts:
        pr = project(c, p)
        meas = (c.measured or {}).get("epoch_steady_s")
        err = None if not meas else pr.epoch_s / meas - 1.0
        rows[c.system] = {"projected_epoch_s": pr.epoch_s, "measured_epoch_s": meas, "error": err,
                          "measured_runs_s": (c.measured or {}).get("runs_epoch_steady_s") or [meas],
                          "projected_iteration_s": pr.iteration_s,
                          "measured_iteration_s": None if not meas else meas / c.iterations_per_epoch,
                          "bottleneck": pr.bottleneck, "bottleneck_stage": pr.bottleneck_stage,
                          "gated": systems is None or c.system in systems,
                          "source": c.source}
    errs = [abs(v["error"]) for v in rows.values() if v["error"] is not None]
    gated = [abs(v["error"]) for v in rows.values() if v["gated"] and v["error"] is not None]
    return {"profile": p.name, "tolerance": tolerance, "systems": rows,
            "gated_systems": sorted(rows) if systems is None else [s for s in systems if s in rows],
            "max_abs_error": max(gated) if gated else None,
            "max_abs_error_all": max(errs) if errs else None,
            "ok": bool(gated) and all(e <= tolerance for e in gated)}
