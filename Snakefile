# lsm-gnn reproduction workflow. Default target `all`: the synthetic dataset (size from the
# config, tiny by default), every run in the matrix, and the report in reports/<size>/.
#   snakemake --cores 2                      # tiny (default), about 15 minutes
#   snakemake --cores 2 --config size=small  # the 1M-node graph
from pathlib import Path

configfile: "workflows/config/default.yaml"

SIZE = config["size"]
DATA = f"data/synthetic-{SIZE}"
RES = f"results/{SIZE}"
REPORT = f"reports/{SIZE}"

# Each rules file appends the report fragments (markdown) its rules produce; the report rule
# stitches them together in this order.
REPORT_FRAGMENTS = []

for smk in sorted(Path("workflows/rules").glob("*.smk")):
    include: str(smk)


rule all:
    input:
        f"{REPORT}/report.md",


rule report:
    input:
        fragments=REPORT_FRAGMENTS,
    output:
        f"{REPORT}/report.md",
    params:
        size=SIZE,
    script:
        "workflows/scripts/assemble_report.py"
