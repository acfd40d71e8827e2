"""Multi-device LSM-GNN: the exchange between ranks and the infrastructure it runs on.

group        the process group: free port, backend (gloo / NCCL), the exchange's own group
health       heartbeats for the launcher's watchdog, fault injection (LSM_GNN_FAULT); the exchange
             and the sources stamp them
gpu          lsm_gnn.ownership's split by owner (v % G) and reorder back as CUDA kernels
             (cuda/owner_split.cu, cuda/reorder.cu via CuPy), on CuPy arrays or, without a copy,
             on torch tensors
owner_files  per-owner feature files: owner o holds rows v % G == o at position v // G
exchange     counts, ids and rows between ranks (all_to_all_single), as device tensors with NCCL
             or host arrays; bytes and time; the host rows' transports (collective, shared memory)

The shared and isolated feature sources are lsm_gnn.sources.shared and lsm_gnn.sources.isolated,
a floor above; the launcher that starts and watches the ranks (spawn, workers, merge, launch) is
lsm_gnn.ranks, above the training loop. See docs/multi-device.md.
"""
