"""G ranks: what starts, runs and watches the processes of a multi-device run (docs/multi-device.md).

health   heartbeats for the watchdog, fault injection (LSM_GNN_FAULT); the exchange and the
         sources stamp them (so it, like group, imports only the config and the errors)
group    the process group: free port, backend (gloo / NCCL), the exchange's own group
workers  what a rank runs: the training loop or a trace replay; its metrics for the record
spawn    spawn G ranks on this machine, watch them, name the failed rank
launch   run_multi_device(cfg) (owner files, spawn, merge, write); the torchrun entry

The merged record is lsm_gnn.records.merge_records; the exchange is lsm_gnn.multidevice.
This package's __init__ imports nothing, so the exchange's import of health loads no launcher.
"""
