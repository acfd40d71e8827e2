"""The `vm` storage profile filled from fio over the feature file now (bench compare's own
measure_vm_profile: IOPS the median of its disk probes, QD1 latency, sequential bandwidth), written
where the testbed's vm runs read it; the emulator-vs-real check compares those runs with the real
disk's, measured in the same chain."""

from pathlib import Path

from wfcommon import log_to

from lsm_gnn.bench.compare import measure_vm_profile
from lsm_gnn.config import load_config
from lsm_gnn.storage.device_model import load_device_profile

sm = snakemake  # noqa: F821
log_to(sm)
out = Path(sm.output[0])
cfg = load_config(None, [f"dataset.path={sm.params.data}"])
res = measure_vm_profile(cfg, load_device_profile("vm"), out_dir=str(out.parent))
if Path(res["path"]) != out:
    raise SystemExit(f"measure_vm_profile wrote {res['path']}, the rule expects {out}")
print(f"vm profile: {res['ssd']}; measured: {res['measured']}")
