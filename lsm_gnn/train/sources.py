"""Moved: the feature sources and their factory live in `lsm_gnn.features` (one place for the
contract, the sources and `make_feature_source`); these names stay importable from here."""

from lsm_gnn.features import (  # noqa: F401
    MemoryFeatureSource,
    StoreFeatureSource,
    make_feature_source,
    open_store,
    system_name,
)
