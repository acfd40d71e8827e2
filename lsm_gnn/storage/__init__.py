"""Feature stores: read rows of node features from storage with exact I/O accounting."""

from lsm_gnn.storage.base import FeatureStore, IOCounters  # noqa: F401
