"""Report section 70: the calibrated projection (lsm-gnn project) next to the measured baselines.

Inputs: `lsm-gnn project --validate RECORDS --hardware this-machine --json` (projected vs measured
steady epoch per system on this machine) and `lsm-gnn project RECORDS --hardware paper --json`
(the same counts on the paper's setting as far as it is public)."""

import json
from pathlib import Path

from lsm_gnn.utils.atomic import write_text

sm = snakemake  # noqa: F821  (injected by Snakemake)

valid = json.loads(Path(sm.input.validate).read_text())
paper = json.loads(Path(sm.input.paper).read_text())


def fmt(v, spec=".1f"):
    return "n/a" if v is None else format(v, spec)


rows = ["| system | measured steady epoch (s) | projected (s) | error | bottleneck |", "|---|---|---|---|---|"]
for name, s in sorted(valid["systems"].items()):
    err = s.get("error")
    rows.append(f"| {name} | {fmt(s.get('measured_epoch_s'))} | {fmt(s.get('projected_epoch_s'))} | "
                f"{'n/a' if err is None else f'{100 * err:+.1f}%'} | {s.get('bottleneck', '')} |")
ratios = paper.get("ratios", {})
p_rows = ["| system | projected steady epoch on the paper's setting (s) | bottleneck |", "|---|---|---|"]
for name, s in sorted(paper["systems"].items()):
    p_rows.append(f"| {name} | {fmt(s.get('epoch_s') or s.get('projected_epoch_s'))} | {s.get('bottleneck', '')} |")
dd = ratios.get("distdgl_vs_lsm_epoch")
verdict = ("n/a (no Dist-DGL or LSM-GNN record)" if dd is None else
           f"{dd:.2f}x: {'consistent with' if dd >= 3.75 else 'short of'} the paper's up to 3.75x")
max_err = valid.get("max_abs_error")
over = valid.get("profile_overrides") or []
measured_here = ("; the SSD's figures are this run's (`lsm-gnn bench storage`, fio): "
                 + ", ".join(f"`{o}`" for o in over)) if over else ""
text = f"""## What the measured traffic costs on other hardware (projection)

`lsm-gnn project` turns each record's counts per iteration (storage reads and bytes, cache, victim
and peer rows, exchange and network bytes) into stage times on a hardware profile and combines them
with each system's overlap rules (docs/projection.md). **Validation on this machine** (profile
`this-machine`, the baseline records above{measured_here}; tolerance {100 * valid['tolerance']:.0f} %): largest error
{fmt(None if max_err is None else 100 * max_err)} %, {'within' if valid.get('ok') else 'NOT within'} the tolerance.

{chr(10).join(rows)}

**The same counts on the paper's setting** (profile `paper`: 1 node, 2 GPUs, 2 NVMe SSDs per GPU
read with BaM, PCIe 4.0; Dist-DGL on 2 nodes x 2 GPUs over a 100 Gb/s NIC). Dist-DGL over LSM-GNN:
**{verdict}**. Assumptions (every number's basis is in `lsm_gnn/project/profiles/paper.yaml`): the
GPU train step (A100-class, 12 ms), no NVLink, the NIC, Dist-DGL's KVStore cost per row scaled from
this machine, and these counts, measured on this graph at this memory, standing for the paper's.

{chr(10).join(p_rows)}
"""
write_text(sm.output.fragment, text)
