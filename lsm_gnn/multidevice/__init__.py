"""Multi-device LSM-GNN: the exchange between ranks and its transports.

gpu          lsm_gnn.ownership's split by owner (v % G) and reorder back as CUDA kernels
             (cuda/owner_split.cu, cuda/reorder.cu via CuPy), on CuPy arrays or, without a copy,
             on torch tensors
owner_files  per-owner feature files: owner o holds rows v % G == o at position v // G
exchange     counts, ids and rows between ranks (all_to_all_single), as device tensors with NCCL
             or host arrays; bytes and time; the host rows' transports (collective, shared memory)
launch,      the old paths of lsm_gnn.ranks.launch and lsm_gnn.ranks.group (README, examples)
group
bench        `lsm-gnn bench multidevice`: shared vs isolated vs one device on one trace

The shared and isolated feature sources are lsm_gnn.sources.shared and lsm_gnn.sources.isolated;
the ranks that run them (launcher, spawn, workers, health, process group) are lsm_gnn.ranks.
See docs/multi-device.md.
"""
