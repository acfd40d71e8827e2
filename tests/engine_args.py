"""Engine settings for tests: the config's defaults with a test's own values.

The engines have no defaults (lsm_gnn.cache.engines.engine_settings gives them the config's); a
test that builds one directly takes `engine_kwargs(**its values)`: the settings of a
CacheConfig with the test's ways / window / refresh_every / lookahead, a victim buffer
of PAPER_DEPTH lines unless the test sets victim_depth, and anything else passed as given."""

from __future__ import annotations

from lsm_gnn.cache.budget import MemoryBudget
from lsm_gnn.cache.engines import engine_settings
from lsm_gnn.cache.policies import configurable_names, kernel_names
from lsm_gnn.config import CacheConfig

PAPER_DEPTH = 32768
"""Victim-queue lines when a test sets none: the authors' scripts' depth, more than any test's
queue receives (nothing is dropped)."""
CONFIG_FIELDS = ("ways", "window", "refresh_every", "lookahead")

# every policy a user may configure that the CPU engine runs: the registry's, in code order
POLICIES = tuple(n for n in configurable_names() if n in kernel_names())


def engine_kwargs(**over) -> dict:
    """(`policy` is passed as given: an engine also runs a name no config may set, hybrid_pvp.)"""
    cfg = CacheConfig(**{k: over.pop(k) for k in CONFIG_FIELDS if k in over})
    depth = over.pop("victim_depth", PAPER_DEPTH)
    kw = engine_settings(cfg, MemoryBudget(0, depth, cfg.window, 1, 1))
    kw["pvp"] = cfg.victim_buffer.enabled
    kw["victim_depth"] = depth
    kw.update(over)
    return kw
