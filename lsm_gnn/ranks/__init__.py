"""The launcher: what starts, runs and watches the G ranks of a multi-device run, above the training
loop they run (docs/multi-device.md).

workers  what a rank runs: the training loop or a trace replay; its metrics for the record
spawn    spawn G ranks on this machine, watch them, name the failed rank
merge    one run record from the ranks' results (rows summed, epoch times the slowest rank's)
launch   run_multi_device(cfg) (owner files, spawn, merge, write); the torchrun entry

The heartbeats and the process group the exchange and the sources use are the exchange's own
infrastructure (lsm_gnn.multidevice.health, lsm_gnn.multidevice.group), a floor below.
"""
