"""Isolated mode (the multi-GPU GIDS baseline): each rank has a plain cache over the whole feature
file and caches what it requests; nothing is exchanged (the shared mode: lsm_gnn.sources.shared).
"""

from __future__ import annotations

from lsm_gnn.cache.budget import for_devices
from lsm_gnn.multidevice.health import NULL_HEARTBEAT, FaultInjector, Heartbeat
from lsm_gnn.contract import as_source
from lsm_gnn.sources.shared import _OverOwnerCache


class IsolatedFeatureSource(_OverOwnerCache):
    """Isolated mode: a rank's own cache over the whole file (no exchange), with the same
    heartbeat and fault hooks as the shared source so both modes run under one harness.
    `devices`: the run's device count, each holding the memory of one such cache."""

    def __init__(self, cache, rank: int, *, heartbeat: Heartbeat = NULL_HEARTBEAT,
                 fault: FaultInjector | None = None, devices: int = 1):
        self.cache, self.rank, self.heartbeat = as_source(cache), rank, heartbeat
        self.fault = fault or FaultInjector(rank)
        self.counters = self.cache.counters
        self.device = self.cache.device
        self.devices = int(devices)

    def check_ids(self, ids, what: str = "ids"):
        return ids  # the rank's cache checks them

    def _advance(self, window) -> None:
        self.heartbeat.beat()
        self.cache.advance(window)

    def _fetch(self, ids):
        self.fault.tick()
        self.heartbeat.beat()
        return self.cache.fetch(ids)

    @property
    def last_tiers(self):
        return self.cache.last_tiers

    def stats(self) -> dict:
        return self.cache.stats()

    def memory(self) -> dict:
        return for_devices(self.cache.memory(), self.devices)
