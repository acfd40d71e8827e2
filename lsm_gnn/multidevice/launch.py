"""The old path of lsm_gnn.ranks.launch (README and docs/multi-device.md showed
`torchrun ... -m lsm_gnn.multidevice.launch` and `run_multi_device` here), kept for users' scripts
and command lines; the launcher lives in lsm_gnn.ranks.launch."""

from lsm_gnn.ranks.launch import main, run_multi_device, torchrun_main  # noqa: F401

if __name__ == "__main__":
    main()
