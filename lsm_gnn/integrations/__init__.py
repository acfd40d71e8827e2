"""LSM-GNN's feature sources in a user's own DGL or PyG training script (docs/integrations.md).

dgl    `DGLDataLoader`: yields DGL's (input_nodes, seeds, blocks) with the feature tensor
       appended, from a DGL block sampler (or lsm-gnn's own sampler, its blocks converted)
pyg    `LsmFeatureStore` (a torch_geometric.data.FeatureStore over a feature source),
       `LsmSampler` (lsm-gnn's sampler behind PyG's BaseSampler interface) and `PyGLoader`
       (yields torch_geometric.data.Data mini-batches)
core   what both share: the seeds dealt to the ranks per epoch, the loader that samples the
       lookahead window ahead and feeds it to the source (lsm_gnn.train.loader.FeatureLoader),
       the per-iteration stats and the run record
bench  `lsm-gnn bench loader`: each loader's time per iteration against FeatureLoader's

The feature source is any from the one factory, lsm_gnn.sources.factory.make_feature_source (the
in-memory ideal, a plain store, the cache, the GPU cache, the shared cache over G ranks).
Each module imports its library (dgl, torch_geometric) only when it is imported.
"""
