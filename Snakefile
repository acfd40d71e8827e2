# lsm-gnn reproduction workflow (docs/workflow.md). Default target `all`: the dataset (generated,
# downloaded and prepared, or given as a path), every run in the matrix, and the report in
# reports/<dataset>/report.md.
#   snakemake --cores 2                                   # synthetic-small, batch 128 (about 12 minutes)
#   snakemake --cores 2 --config dataset=igb-tiny         # a real dataset: download, prepare, verify, runs
#   snakemake --cores 2 --config dataset=/path/to/prepared
#   snakemake --cores 2 --config size=tiny                # alias of dataset=synthetic-tiny
from pathlib import Path

from snakemake.utils import min_version

min_version("9.0")


configfile: str(Path(workflow.basedir) / "workflows/config/default.yaml")


include: "workflows/rules/common.smk"
include: "workflows/rules/10-dataset.smk"
include: "workflows/rules/20-storage.smk"
include: "workflows/rules/30-cache.smk"
include: "workflows/rules/40-train.smk"
include: "workflows/rules/50-multidevice.smk"
include: "workflows/rules/60-baselines.smk"
include: "workflows/rules/70-projection.smk"
include: "workflows/rules/80-verdicts.smk"


rule all:
    input:
        f"{REPORT}/report.md",
    message:
        f"Reproduction of {DS['name']} complete: {REPORT}/report.md"
    default_target: True


rule report:
    input:
        verdicts=f"{REPORT}/sections/00-verdicts.md",
        fragments=REPORT_FRAGMENTS,
        regime=f"{RES}/cache/regime.json",
    output:
        f"{REPORT}/report.md",
    params:
        dataset=DS,
        config=config,
    log:
        f"{LOGS}/report.log",
    message:
        "Stitching the report of {params.dataset[name]} from its sections"
    script:
        "workflows/scripts/assemble_report.py"
