"""Every feature source and the one factory of them all (docs/architecture.md); the contract they
keep is lsm_gnn.contract, a floor below (the cache's id check and the owner rule import it too).

ideal          MemoryFeatureSource: the ideal, every feature row in memory
store          StoreFeatureSource: every request read from a FeatureStore (the plain storage loader)
shard          OwnerShard: what both cache planes share (store, owner, budget, window, counters,
               the contract's id checks and reports)
cached         CachedFeatureSource: the LSM-GNN cache's host data plane (one host row pool)
cached_device  DeviceCachedFeatureSource: the cache's torch data plane (rows on a device)
shared         SharedCacheFeatureSource: shared mode over G devices (split by owner, exchange)
isolated       IsolatedFeatureSource: isolated mode, a rank's own cache over the whole file
factory        make_feature_source(cfg, dataset, rank, world, ...): the source a run asks for; it
               stands above every source it builds

This package's __init__ imports nothing.
"""
