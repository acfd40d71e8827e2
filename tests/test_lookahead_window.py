"""The lookahead horizon is one derived value of the cache config, and one rule says when the
loader samples that far ahead (CacheConfig.horizon, lsm_gnn.train.loader.loader_horizon)."""

import numpy as np

from lsm_gnn.config import load_config
from lsm_gnn.sources.ideal import MemoryFeatureSource
from lsm_gnn.train.loader import loader_horizon


class OwnCache:
    """A caller's own source: advance and fetch, no lsm_gnn FeatureSource."""

    def advance(self, window):
        pass

    def fetch(self, ids):
        return np.zeros((len(ids), 1), np.float32)


def _cache(**over):
    return load_config(None, {f"cache.{k}": v for k, v in over.items()}).cache


def test_the_horizon_is_the_window_or_k_for_a_long_lookahead_policy():
    assert _cache(policy="hybrid", window=5, lookahead=40).horizon == 5
    assert _cache(policy="horizon", window=5, lookahead=40).horizon == 40


def test_the_loader_samples_the_horizon_ahead_when_the_cache_is_on():
    c = _cache(enabled=True, window=6)
    assert loader_horizon(c) == loader_horizon(c, MemoryFeatureSource(np.zeros((4, 1)))) == 6


def test_with_the_cache_off_only_a_callers_own_source_gets_the_horizon():
    c = _cache(enabled=False, window=6)
    assert loader_horizon(c) == 0
    assert loader_horizon(c, MemoryFeatureSource(np.zeros((4, 1)))) == 0
    assert loader_horizon(c, OwnCache()) == 6
