"""Multi-device LSM-GNN: the shared cache's communication layer, the launcher, isolated mode.

owners       split ids by owner (v % G) with positions; reorder rows back (CPU engine)
gpu          the same split and reorder as CuPy kernels (cuda/owner_split.cu, cuda/reorder.cu)
owner_files  per-owner feature files: owner o holds rows v % G == o at position v // G
exchange     counts, ids and rows between ranks (all_to_all_single), bytes and time
source       SharedCacheFeatureSource (shared mode) and IsolatedFeatureSource
health       heartbeats for the watchdog, fault injection (LSM_GNN_FAULT)
launch       run_multi_device(cfg): spawn G ranks, watch them, merge one run record; torchrun entry
bench        `lsm-gnn bench multidevice`: shared vs isolated vs one device on one trace

See docs/multi-device.md.
"""
