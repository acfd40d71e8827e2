"""The PVP study's replays at one batch (rule cache_pvp): every configuration of `params.points` on
one trace in one process, so the bounds (Belady MIN at the same total memory) are computed once.
Each row is what `lsm-gnn simulate DATASET --trace T --policy P --cache-fraction F --window W
--victim --host-fraction H` (or `--no-victim`) prints for that configuration: the same function
(lsm_gnn.sim.simulate.simulate) on the same configuration (lsm_gnn.config's cache section, the
victim buffer's host share set). The authors' configuration (a point with `extra`) keeps the whole
budget as cache lines and adds W queues + the landing buffer of `depth` lines in host memory
(column `setting`: "authors"; the others "equal memory")."""

import numpy as np

from lsm_gnn.cache.budget import total_rows_for
from lsm_gnn.config import load_config
from lsm_gnn.datasets.format import Dataset
from lsm_gnn.sim.simulate import simulate
from lsm_gnn.sim.trace import Trace
from lsm_gnn.utils.atomic import write_text

from wfcommon import log_to

sm = snakemake  # noqa: F821  (injected by Snakemake)
log_to(sm)
run_cfg = load_config(None)
ds = Dataset(sm.params.data)
if sm.input.trace:
    trace = Trace.load(sm.input.trace[0])
else:
    from lsm_gnn.sim.generate import generate_trace

    trace = generate_trace(ds, fanouts=[int(x) for x in sm.params.fanouts.split(",")], batch_size=int(sm.wildcards.batch),
                           seed=int(sm.params.seed), epochs=1, devices=1, max_batches=int(sm.params.iterations),
                           shuffle=run_cfg.sampler.shuffle, split="train", progress=False)
base = run_cfg.cache
row_bytes = ds.features().row_bytes
configs = []
for p in sm.params.points:
    if p.get("extra"):
        # the authors' configuration: every row of the budget stays a cache line (as without the buffer)
        # and the W queues + landing buffer of `depth` lines come on top, in host memory
        cache_rows = total_rows_for(base.model_copy(update={"capacity_fraction": float(p["fraction"]),
                                                            "capacity_bytes": None}), trace.num_rows)
        host_rows = (int(p["window"]) + 1) * int(p["depth"])
        vb = base.victim_buffer.model_copy(update={"enabled": True, "depth": int(p["depth"]), "force": True})
        configs.append(base.model_copy(update={"policy": p["policy"], "capacity_bytes": (cache_rows + host_rows) * row_bytes,
                                               "window": int(p["window"]), "victim_buffer": vb}))
        print(f"lsm-gnn simulate {sm.params.data} --trace TRACE --policy {p['policy']} --window {p['window']} "
              f"--victim --victim-depth {p['depth']} --config CFG  # the authors' configuration; CFG: "
              f"cache.capacity_bytes {(cache_rows + host_rows) * row_bytes}, cache.victim_buffer.force true")
        continue
    vb = base.victim_buffer.model_copy(update={"enabled": bool(p["victim"]), "host_fraction": p["host"]})
    configs.append(base.model_copy(update={"policy": p["policy"], "capacity_fraction": float(p["fraction"]),
                                           "capacity_bytes": None, "window": int(p["window"]), "victim_buffer": vb}))
    print(f"lsm-gnn simulate {sm.params.data} --trace TRACE --policy {p['policy']} --cache-fraction {p['fraction']} "
          f"--window {p['window']} " + (f"--victim --host-fraction {p['host']}" if p["victim"] else "--no-victim"))
df = simulate(trace, configs, static_scores=np.asarray(ds.static_scores()), mode="shared",
              row_bytes=row_bytes, progress=False)
# the configured host share of each point (the budget rounds the rows: host_share in the report is measured)
df["host_fraction"] = [(p["host"] if p["victim"] else 0.0) if not p.get("extra") else None for p in sm.params.points]
# "equal memory": every tier out of one budget; "authors": the queues in extra host memory
df["setting"] = ["authors" if p.get("extra") else "equal memory" for p in sm.params.points]
write_text(sm.output.csv, df.to_csv(index=False))
print(f"{len(df)} configurations on {trace.num_batches} iterations")
