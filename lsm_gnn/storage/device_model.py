"""The storage device model: one place for what an SSD (and a device's set of SSDs) can serve.

Used by the emulated storage device (lsm_gnn.storage.emulated: the completion time of every read),
by `bench compare`'s floor (lsm_gnn/bench/compare.py) and by the projection's storage term
(lsm_gnn.project.model). docs/storage.md, "The emulated storage device".

One SSD has an IOPS cap, a bandwidth, a latency at queue depth 1 and a maximum queue depth. With
Q reads of b bytes in flight (Little's law: throughput = reads in flight / time each takes):

    throughput(Q, b) = min(min(Q, max_queue_depth) / latency_s, iops, bandwidth / b)   reads/s

A device has `ssds_per_device` SSDs of its own, its pages striped over them as the paper's
system does: node v of owner g sits at line v / G of owner g's SSDs, on SSD (v / G) % n
(GIDS's multi-GPU read path, github.com/jeongminpark417/GIDS: `ctrl = cl_id % n_ctrls` with
`cl_id = node_id / num_gpus`; each GPU drives its own SSDs, ZaidQureshi/bam#35). With
`shared: true` the SSDs belong to the node and every device reads them (this VM's one disk).

The virtual clock (the NVMeVirt model: Kim et al., FAST'23, "NVMeVirt: A Versatile
Software-defined Virtual NVMe Device"): each SSD keeps the time it is next free; a read submitted
at `submit` starts at `start = max(submit, ssd_free, done of the read max_queue_depth reads
earlier)`, occupies the SSD for `occupancy = max(1 / iops, bytes / bandwidth)` and completes at
`done = start + occupancy + (latency_s - occupancy)`, i.e. latency_s after it started (a lone read
at QD 1 takes exactly latency_s; a full queue completes one read per occupancy). Under a closed
loop of Q reads in flight this gives exactly the formula above. `schedule` computes the completion
times of a batch of reads at its submission (the emulator then waits for them).

`time_scale` S (emulation.time_scale) divides every rate by S and multiplies every latency by S.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

PACKAGED = ("vm", "paper", "optane")
PROFILE_DIR = Path(__file__).resolve().parent / "device_profiles"
PAGE = 4096
"""The read unit of the model's striping: BaM's page, one NVMe command per page."""


class _S(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SSDModel(_S):
    """One SSD."""

    iops: float = Field(gt=0)
    """Random 4 KiB reads per second at full queue (the IOPS cap)."""
    bandwidth: float = Field(gt=0)
    """Read bytes per second (large requests)."""
    latency_s: float = Field(ge=0)
    """One 4 KiB read alone (queue depth 1)."""
    max_queue_depth: int | None = Field(None, ge=1)
    """Reads the SSD serves at once at most (None: no limit below the IOPS cap)."""

    def occupancy(self, nbytes: float = PAGE) -> float:
        """Seconds the SSD is busy with one read of `nbytes` (its share of the IOPS or bandwidth cap)."""
        return max(1.0 / self.iops, nbytes / self.bandwidth)

    def throughput(self, queue_depth: float, nbytes: float = PAGE) -> float:
        """Reads per second with `queue_depth` reads of `nbytes` in flight (Little's law, capped)."""
        q = queue_depth if self.max_queue_depth is None else min(queue_depth, self.max_queue_depth)
        by_latency = q / self.latency_s if self.latency_s > 0 else math.inf
        return min(by_latency, self.iops, self.bandwidth / nbytes)

    def regime(self, queue_depth: float, nbytes: float = PAGE) -> str:
        """Which term of `throughput` binds: latency, iops or bandwidth."""
        t = self.throughput(queue_depth, nbytes)
        if t == self.iops:
            return "iops"
        return "bandwidth" if t == self.bandwidth / nbytes else "latency"

    def scaled(self, time_scale: float) -> "SSDModel":
        """The same SSD on a clock `time_scale` times slower: rates / S, latency x S."""
        if time_scale == 1.0:
            return self
        return SSDModel(iops=self.iops / time_scale, bandwidth=self.bandwidth / time_scale,
                        latency_s=self.latency_s * time_scale, max_queue_depth=self.max_queue_depth)


class DeviceProfile(_S):
    """The storage of a node: per device (GPU) its SSDs, or SSDs shared by all devices."""

    name: str
    description: str = ""
    ssd: SSDModel
    ssds_per_device: int = Field(ge=1)
    """SSDs per device; with `shared: true`, the node's SSDs, read by every device."""
    shared: bool = False
    devices: int | None = Field(None, ge=1)
    """The devices (GPUs) of the testbed this profile describes (documentation and checks)."""
    measured_by: str | None = None
    """`fio`: the numbers are filled from fio over the feature file in the same run (`vm`)."""
    notes: list[str] = Field(default_factory=list)

    def scaled(self, time_scale: float) -> "DeviceProfile":
        return self.model_copy(update={"ssd": self.ssd.scaled(time_scale)})

    def as_record(self, time_scale: float = 1.0) -> dict:
        return {"profile": self.name, "ssd": self.ssd.model_dump(), "ssds_per_device": self.ssds_per_device,
                "shared": self.shared, "measured_by": self.measured_by, "time_scale": time_scale}


def load_device_profile(name_or_path: str | os.PathLike) -> DeviceProfile:
    """A packaged storage device profile by name (vm, paper, optane) or a YAML file by path; validated."""
    from lsm_gnn.utils.yamlmodel import load_model

    return load_model(DeviceProfile, name_or_path, PROFILE_DIR, PACKAGED, what="storage device profile")


def is_known_profile(name: str) -> bool:
    return name in PACKAGED or str(name).endswith((".yaml", ".yml"))


# ---- the closed-form model: the floor and the projection ------------------------------------------
def reads_seconds(ssd: SSDModel, ios: float, nbytes: float, *, ssds: float = 1, queue_depth: float | None = None,
                  sharers: float = 1) -> tuple[float, str]:
    """Seconds for one worker's `ios` reads of `nbytes` bytes in all, spread evenly over `ssds`
    SSDs, with `queue_depth` of them in flight (None: deep enough for the caps), while `sharers`
    workers (itself included) read the same SSDs at the same time, each as much. Returns (seconds,
    the binding term: iops, bandwidth or latency).

        max(sharers x IO / (n x iops), sharers x B / (n x bandwidth), IO x latency / QD)

    (the throughput formula of SSDModel.throughput applied to the batch: the caps are shared by
    the readers, the latency term is the worker's own queue; QD capped at n x max_queue_depth).
    """
    if ios <= 0:
        return 0.0, "iops"
    iops_t = sharers * ios / (ssds * ssd.iops)
    bw_t = sharers * nbytes / (ssds * ssd.bandwidth)
    lat_t = 0.0
    if queue_depth is not None:
        q = queue_depth if ssd.max_queue_depth is None else min(queue_depth, ssds * ssd.max_queue_depth)
        lat_t = ios * ssd.latency_s / q
    t = max(iops_t, bw_t, lat_t)
    return t, ("iops" if t == iops_t else ("bandwidth" if t == bw_t else "latency"))


def device_reads_seconds(profile: DeviceProfile, ios: float, nbytes: float, *, devices: int,
                         queue_depth: float | None = None) -> tuple[float, str]:
    """One device's reads per iteration on `profile` (scaled already if it should be), with
    `devices` devices reading alike: on shared SSDs they share the caps."""
    return reads_seconds(profile.ssd, ios, nbytes, ssds=profile.ssds_per_device, queue_depth=queue_depth,
                         sharers=devices if profile.shared else 1)


# ---- striping and the virtual clock (the emulator) -------------------------------------------------
def stripe(pages: np.ndarray, n_ssd: int) -> np.ndarray:
    """The SSD of each page of an owner's file: page % n (the paper's `(v / G) % n_ssd` with one
    4 KiB row per page: page p of owner g's file is node p x G + g)."""
    return (np.asarray(pages, np.int64) % n_ssd).astype(np.int64)


def read_pages(offsets: np.ndarray, lengths: np.ndarray, page: int = PAGE) -> np.ndarray:
    """The pages (file offset // page) the reads (offset, length) cover, in read order: BaM issues
    one NVMe command per page, so a merged read of k pages is k commands."""
    offsets = np.asarray(offsets, np.int64)
    lengths = np.asarray(lengths, np.int64)
    first = offsets // page
    last = (offsets + lengths - 1) // page
    n = last - first + 1
    if len(n) == 0:
        return np.empty(0, np.int64)
    if int(n.max()) == 1:
        return first
    starts = np.repeat(first - np.concatenate([[0], np.cumsum(n)[:-1]]), n)
    return starts + np.arange(int(n.sum()), dtype=np.int64)


def _schedule_py(ssd_of, submit_ns, qd, occ_ns, rest_ns, free, ring, heads, out):  # pragma: no cover - compiled
    """Completion time (ns) of each read: the host keeps `qd` reads in flight (a read is submitted
    when the earliest in-flight one completes); per SSD s: start = max(submit, free[s], ring[s, head]),
    done = start + occ + rest. Updates free, ring, heads (the clock's state) in place."""
    n = ssd_of.shape[0]
    heap = np.empty(qd, np.int64)
    size = 0
    depth = ring.shape[1]
    last = submit_ns
    for i in range(n):
        if size < qd:
            sub = submit_ns
        else:
            # pop the earliest completion: the slot it frees takes the next read
            sub = heap[0]
            size -= 1
            heap[0] = heap[size]
            j = 0
            while True:
                lft = 2 * j + 1
                if lft >= size:
                    break
                c = lft
                if lft + 1 < size and heap[lft + 1] < heap[lft]:
                    c = lft + 1
                if heap[c] < heap[j]:
                    t = heap[c]
                    heap[c] = heap[j]
                    heap[j] = t
                    j = c
                else:
                    break
        s = ssd_of[i]
        start = sub
        if free[s] > start:
            start = free[s]
        h = heads[s]
        if depth > 0 and ring[s, h] > start:
            start = ring[s, h]
        free[s] = start + occ_ns
        done = start + occ_ns + rest_ns
        if depth > 0:
            ring[s, h] = done
            heads[s] = (h + 1) % depth
        out[i] = done
        if done > last:
            last = done
        # push done
        j = size
        heap[j] = done
        size += 1
        while j > 0:
            p = (j - 1) // 2
            if heap[p] > heap[j]:
                t = heap[p]
                heap[p] = heap[j]
                heap[j] = t
                j = p
            else:
                break
    return last


_compiled = None


def _kernel():
    """`_schedule_py` compiled (numba, imported on first use so that loading a config stays light)."""
    global _compiled
    if _compiled is None:
        import numba

        _compiled = numba.njit(cache=True, nogil=True)(_schedule_py)
    return _compiled


class ClockState:
    """The state of one virtual clock: per SSD the time it is next free and the completion times of
    its last max_queue_depth reads (int64 ns of time.perf_counter_ns, CLOCK_MONOTONIC: the same
    clock in every process of the machine). In process memory, or over a shared buffer (`buf`)."""

    def __init__(self, n_ssd: int, max_queue_depth: int | None, buf=None):
        depth = max_queue_depth or 0
        self.n_ssd, self.depth = n_ssd, depth
        words = n_ssd * (2 + depth)
        arr = np.zeros(words, np.int64) if buf is None else np.frombuffer(buf, np.int64, count=words)
        self.words = arr
        self.free = arr[:n_ssd]
        self.heads = arr[n_ssd: 2 * n_ssd]
        self.ring = arr[2 * n_ssd:].reshape(n_ssd, depth)

    @staticmethod
    def nbytes(n_ssd: int, max_queue_depth: int | None) -> int:
        return 8 * n_ssd * (2 + (max_queue_depth or 0))


def schedule(state: ClockState, ssd: SSDModel, ssd_of: np.ndarray, submit_ns: int, queue_depth: int,
             nbytes: int = PAGE) -> np.ndarray:
    """Completion times (ns) of reads on the SSDs `ssd_of` (one per read, in submission order)
    submitted at `submit_ns` with `queue_depth` in flight; advances `state` (the caller holds its
    lock when it is shared). `ssd` is the (scaled) SSD of the profile."""
    occ = ssd.occupancy(nbytes)
    occ_ns = int(round(occ * 1e9))
    rest_ns = int(round(max(0.0, ssd.latency_s - occ) * 1e9))
    out = np.empty(len(ssd_of), np.int64)
    if len(ssd_of):
        _kernel()(np.ascontiguousarray(ssd_of, np.int64), np.int64(submit_ns), max(1, int(queue_depth)),
                  np.int64(occ_ns), np.int64(rest_ns), state.free, state.ring, state.heads, out)
    return out
