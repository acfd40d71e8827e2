"""One memory budget per device, from which every feature-memory tier draws.

`cache.capacity_fraction` (or `capacity_bytes`) is the **total** feature memory of one device:
device cache lines + the victim buffer's W host queues + the PVP landing buffer. The host tier
(queues and landing buffer, `depth` lines each) takes `victim_buffer.host_fraction` of the total
(unset: the policy's share, `host_share`: 0.10 for the paper's policies, 0 for horizon, which
keeps the whole budget as cache lines); what remains is the device cache. A long-lookahead
policy's K batches of ids are not feature rows and are not in the budget; `lookahead_bytes`
states them (docs/memory-budget.md). Every system and every bound is sized from here, so
that a comparison at "10 %" means the same bytes for each of them (docs/memory-budget.md).

Why a share and not the paper's absolute depth: the authors' scripts use `pvp_depth = 32768` lines
per queue next to GPU caches of many GB on a 1.1 TB dataset. Copied as an absolute number onto a
1M-node graph, the same depth made the host tier 2.6x the cache (40 % of all rows) and every
figure measured it, not the cache. The default share, 0.10, is that of the authors' setting: 8
queues + 1 landing buffer of 32768 x 4 KiB lines = 1152 MiB beside the 10 GiB GPU cache of the
GIDS artifact (the same authors' single-GPU predecessor; LSM-GNN's own cache sizes are not
published): 1152 / (10240 + 1152) = 10.1 %.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from lsm_gnn.utils.errors import ConfigError

DEPTH_KEY = "cache.victim_buffer.depth"


@dataclass(frozen=True)
class MemoryBudget:
    """How one device's feature memory is split (rows of `row_bytes`)."""

    cache_rows: int
    """Device cache lines."""
    victim_depth: int
    """Lines per victim queue and in the landing buffer; 0: no victim buffer."""
    window: int
    """Victim queues (one per batch of the lookahead window)."""
    row_bytes: int
    feature_rows: int
    """Rows of the whole dataset (for fraction_of_features)."""

    @property
    def pvp(self) -> bool:
        return self.victim_depth > 0 and self.window > 0

    @property
    def queue_rows(self) -> int:
        return self.window * self.victim_depth if self.pvp else 0

    @property
    def landing_rows(self) -> int:
        return self.victim_depth if self.pvp else 0

    @property
    def host_rows(self) -> int:
        """Victim queues + landing buffer: every row the victim buffer and PVP hold."""
        return self.queue_rows + self.landing_rows

    @property
    def total_rows(self) -> int:
        return self.cache_rows + self.host_rows

    @property
    def engine_depth(self) -> int:
        """The engines' victim_depth argument (at least 1; unused without the PVP)."""
        return max(1, self.victim_depth)

    def record(self) -> dict:
        """The run record's `memory` block for one device."""
        return memory_record(self.cache_rows * self.row_bytes, self.host_rows * self.row_bytes,
                             self.feature_rows * self.row_bytes)


def memory_record(cache_bytes: int, victim_bytes: int, feature_bytes: int, *, devices: int = 1) -> dict:
    """`memory` of a run record: per-device bytes and the fraction of all feature bytes they make.

    For a system without a cache pass what holds its features instead (mmap: the page-cache cap
    as cache_bytes; Dist-DGL and the ideal: the feature bytes in RAM)."""
    total = int(cache_bytes) + int(victim_bytes)
    return {"cache_bytes": int(cache_bytes), "victim_bytes": int(victim_bytes), "total_bytes": total,
            "devices": int(devices), "fraction_of_features": total / feature_bytes if feature_bytes else 0.0}


def for_devices(block: dict, devices: int) -> dict:
    """`block` (one device's memory, as `memory_record` makes it) counted over `devices` devices:
    `devices`, `all_devices_bytes` and `all_devices_fraction` set; what a feature source's
    `memory()` returns and what the multi-device record states."""
    out = dict(block)
    out["devices"] = int(devices)
    out["all_devices_bytes"] = int(out["total_bytes"]) * int(devices)
    out["all_devices_fraction"] = float(out["fraction_of_features"]) * int(devices)
    return out


def device_memory(per_device_bytes: int, victim_bytes: int, feature_bytes: int, devices: int = 1, **extra) -> dict:
    """A memory block (`memory_record`, plus `extra` keys) for `devices` devices: what a source
    without a budget of its own (the ideal, a plain store) returns from `memory()`."""
    return for_devices({**memory_record(per_device_bytes, victim_bytes, feature_bytes), **extra}, devices)


def host_share(cfg) -> float:
    """The share of the total budget for the host tier: victim_buffer.host_fraction, or the
    policy's default share when it is unset (lsm_gnn.cache.policies.default_host_fraction)."""
    share = getattr(cfg.victim_buffer, "host_fraction", None)
    if share is None:
        from lsm_gnn.cache.policies import default_host_fraction

        share = default_host_fraction(cfg.policy)
    return float(share)


def lookahead_bytes(max_window_ids: int, max_records: int, owned_rows: int, lookahead: int) -> dict:
    """Host memory of a K-batch lookahead (not feature memory, not in the budget): the window of
    ids the feature source hands the engine (int64) and the CPU engine's ring (an int32 row and
    an int32 next use per id of K + 1 batches, an int64 last record per owned row)."""
    window = 8 * int(max_window_ids)
    ring = 8 * int(max_records) + 8 * int(owned_rows) + 8 * (int(lookahead) + 2) + 24
    return {"lookahead_batches": int(lookahead), "window_ids_bytes": window, "engine_ring_bytes": ring,
            "lookahead_bytes": window + ring}


def exact(x: float) -> Fraction:
    """A fraction from the config as its decimal reads (0.29 is 29/100, not the binary double just
    below it), so that a floor of its product with a row count is exact: int(0.29 * 100) is 28."""
    return Fraction(repr(float(x)))


def total_rows_for(cfg, num_rows: int, row_bytes: int | None = None) -> int:
    """Rows of one device's total budget: capacity_bytes // row_bytes, else
    floor(capacity_fraction * num_rows), in exact arithmetic."""
    if cfg.capacity_bytes is not None:
        if not row_bytes:
            raise ConfigError("<config>", "cache.capacity_bytes", "set: pass row_bytes (or use capacity_fraction)")
        return int(cfg.capacity_bytes) // int(row_bytes)
    return math.floor(exact(cfg.capacity_fraction) * int(num_rows))


def memory_budget(cfg, num_rows: int, row_bytes: int | None = None, *, owned_rows: int | None = None,
                  scale: int = 1) -> MemoryBudget:
    """Split one device's budget (a CacheConfig) between the device cache and the host tier.

    `owned_rows`: rows this device's cache may hold (its owner's share with a shared cache; all
    rows otherwise). `scale`: the budget of `scale` devices in one (the "one device with 2x
    memory" run), split by the same rule. An explicit `victim_buffer.depth` is refused when the
    host tier would exceed the device cache or its queues the rows they could ever hold, unless
    `victim_buffer.force` is set.
    """
    row_bytes = int(row_bytes or 0)
    if not cfg.enabled:
        return MemoryBudget(0, 0, 0, row_bytes, int(num_rows))
    total = total_rows_for(cfg, num_rows, row_bytes) * int(scale)
    owned = int(num_rows if owned_rows is None else owned_rows)
    vb, w = cfg.victim_buffer, int(cfg.window)
    depth = 0
    if vb.enabled and w > 0:
        if vb.depth is None:
            depth = math.floor(total * exact(host_share(cfg))) // (w + 1)
        else:
            depth = int(vb.depth)
            host, cache = (w + 1) * depth, total - (w + 1) * depth
            if not vb.force and host > cache:
                raise ConfigError("<config>", DEPTH_KEY, (
                    f"{depth} lines per queue make a host tier of {host} rows ({w} queues + landing buffer) "
                    f"out of a total budget of {total} rows, more than the {max(cache, 0)} left for the device "
                    "cache; lower the depth, unset it (host_fraction), or set cache.victim_buffer.force"))
            if not vb.force and w * depth > owned:
                raise ConfigError("<config>", DEPTH_KEY, (
                    f"{w} queues x {depth} lines = {w * depth} rows, more than the {owned} rows this device "
                    "could ever hold; lower the depth or set cache.victim_buffer.force"))
    cache_rows = total - (w + 1) * depth if depth else total
    if cache_rows < 1:
        raise ConfigError("<config>", "cache.capacity_fraction", (
            f"a total budget of {total} rows leaves {cache_rows} device cache lines after a host tier of "
            f"{total - cache_rows} rows; raise the capacity or lower the victim buffer"))
    return MemoryBudget(cache_rows, depth, w if depth else 0, row_bytes, int(num_rows))


def budget_for_cache_rows(cfg, cache_rows: int, num_rows: int, row_bytes: int = 1) -> MemoryBudget:
    """A budget whose device cache has exactly `cache_rows` lines and whose host tier is what
    `cfg.victim_buffer` asks for (an explicit depth, else the host share of the total): for
    sweeps over the cache size and for tests."""
    vb, w = cfg.victim_buffer, int(cfg.window)
    depth = 0
    if cfg.enabled and vb.enabled and w > 0:
        if vb.depth is not None:
            depth = int(vb.depth)
        else:  # total = cache + host and host = host_fraction * total
            share = exact(host_share(cfg))
            depth = math.floor(int(cache_rows) * share / (1 - share)) // (w + 1)
    return MemoryBudget(int(cache_rows) if cfg.enabled else 0, depth, w if depth else 0, int(row_bytes),
                        int(num_rows))


def system_memory(cache_cfg, system: str, num_rows: int, row_bytes: int, *, devices: int = 1,
                  page_cache_bytes: int | None = None, machines: int | None = None) -> dict:
    """The record's `memory` block of any system: per device, what holds feature rows.

    lsm / isolated: the budget split (cache lines + victim buffer and landing buffer); memory (the
    ideal): every feature row on each device; mmap: the device's share of the page-cache cap
    (`page_cache_bytes` over all devices; None: uncapped, counted as every row); direct: nothing;
    distdgl: its servers keep every row in RAM, spread over `machines` (per device = per machine).
    `all_devices_bytes` and `all_devices_fraction` add the devices up."""
    from lsm_gnn.ownership import local_rows

    feature_bytes = int(num_rows) * int(row_bytes)
    if system in ("lsm", "isolated") and cache_cfg.enabled:
        owned = local_rows(num_rows, devices) if system == "lsm" else num_rows
        out = memory_budget(cache_cfg, num_rows, row_bytes, owned_rows=owned).record()
    elif system == "memory":
        out = memory_record(feature_bytes, 0, feature_bytes)
    elif system == "mmap":
        cap = feature_bytes * devices if page_cache_bytes is None else int(page_cache_bytes)
        out = memory_record(cap // max(devices, 1), 0, feature_bytes)
        out["page_cache_capped"] = page_cache_bytes is not None
    elif system == "distdgl":
        devices = int(machines or devices)
        out = memory_record(-(-feature_bytes // devices), 0, feature_bytes)
    else:  # direct: every request read from storage
        out = memory_record(0, 0, feature_bytes)
    out["devices"] = int(devices)
    out["all_devices_bytes"] = out["total_bytes"] * int(devices)
    out["all_devices_fraction"] = out["all_devices_bytes"] / feature_bytes if feature_bytes else 0.0
    return out
