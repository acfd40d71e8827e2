"""Dist-DGL's partitions, made once per layout (machines x trainers) for every Dist-DGL run of the
workflow, the baselines' and the testbed's (METIS as a Dist-DGL run does on its own, at the
harness's path under the folder: `<name>-<machines>-<method>`); each run reuses them
(baseline.partition_dir) and its record still reports the partitioning's time (lsm_partition.json)."""

from pathlib import Path

from wfcommon import log_to

from baselines.distdgl.partition import partition_dataset
from lsm_gnn.config import load_config
from lsm_gnn.datasets.format import Dataset

sm = snakemake  # noqa: F821
log_to(sm)
cfg = load_config(None, [f"dataset.path={sm.params.data}"])
ds = Dataset(cfg.dataset.path)
method = cfg.baseline.partition_method
folder = Path(sm.output[0])
folder.mkdir(parents=True, exist_ok=True)
info = partition_dataset(ds, folder / f"{ds.name}-{sm.params.machines}-{method}", int(sm.params.machines), method,
                         num_trainers_per_machine=int(sm.params.trainers))
print(f"partitioned {ds.name} into {info.num_parts} ({method}): load {info.load_s:.1f} s, partition {info.partition_s:.1f} s")
