"""Feature sources without a cache, and the one factory of every source.

ideal    MemoryFeatureSource: the ideal, every feature row in memory
store    StoreFeatureSource: every request read from a FeatureStore (the plain storage loader)
factory  make_feature_source(cfg, dataset, rank, world, ...): the source a run asks for (these,
         the LSM-GNN cache of lsm_gnn.cache, the shared and isolated sources of
         lsm_gnn.multidevice); it stands above every source it builds

The contract they implement is lsm_gnn.features (it imports none of them).
"""
