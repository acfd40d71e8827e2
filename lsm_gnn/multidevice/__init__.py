"""Multi-device LSM-GNN: the shared cache's communication layer, the launcher, isolated mode.

owners       split ids by owner (v % G) with positions; reorder rows back (CPU engine)
gpu          the same split and reorder as CUDA kernels (cuda/owner_split.cu, cuda/reorder.cu via
             CuPy), on CuPy arrays or, without a copy, on torch tensors
owner_files  per-owner feature files: owner o holds rows v % G == o at position v // G
exchange     counts, ids and rows between ranks (all_to_all_single), as device tensors with NCCL
             or host arrays; bytes and time
health       heartbeats for the watchdog, fault injection (LSM_GNN_FAULT)
group        the process group: free port, backend (gloo / NCCL), the exchange's own group
workers      what a rank runs: the training loop or a trace replay; its metrics for the record
spawn        spawn G ranks on this machine, watch them, name the failed rank
merge        one run record from the ranks' results (or a failed record)
launch       run_multi_device(cfg) (owner files, spawn, merge, write); the torchrun entry
bench        `lsm-gnn bench multidevice`: shared vs isolated vs one device on one trace

The shared and isolated feature sources are lsm_gnn.sources.shared and lsm_gnn.sources.isolated.
See docs/multi-device.md.
"""
