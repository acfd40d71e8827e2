# The synthetic dataset every other rule reads: generate it (size / seed / heterogeneous from the
# config), verify every file against its metadata, and report its statistics with figures.
# tiny: about 10 s in all; small (--config size=small): about 40 s and 4 GB of features.

import sys as _dataset_sys

# the venv's console script next to the Python that runs Snakemake (PATH may lack the venv)
DATASET_CLI = str(Path(_dataset_sys.executable).with_name("lsm-gnn"))
if not Path(DATASET_CLI).exists():
    DATASET_CLI = "lsm-gnn"

REPORT_FRAGMENTS.append(f"{REPORT}/sections/10-dataset.md")


rule dataset_generate:
    output:
        f"{DATA}/metadata.json",
    params:
        cli=DATASET_CLI,
        data=DATA,
        size=SIZE,
        seed=config.get("seed", 0),
        hetero="--hetero" if config.get("heterogeneous") else "",
    log:
        f"{RES}/logs/dataset_generate.log",
    benchmark:
        f"{RES}/dataset/generate.benchmark.tsv"
    shell:
        # --force: Snakemake has already created the (empty) output folder
        "{params.cli} dataset generate {params.size} --seed {params.seed} {params.hetero} "
        "--out {params.data} --force --no-progress > {log} 2>&1"


rule dataset_verify:
    input:
        f"{DATA}/metadata.json",
    output:
        f"{RES}/dataset/verify.txt",
    params:
        data=DATA,
    script:
        "../scripts/dataset_verify.py"


rule dataset_report:
    input:
        meta=f"{DATA}/metadata.json",
        verify=f"{RES}/dataset/verify.txt",
        benchmark=f"{RES}/dataset/generate.benchmark.tsv",
    output:
        stats=f"{RES}/dataset/stats.json",
        degree=f"{REPORT}/figures/dataset_degree.png",
        pagerank=f"{REPORT}/figures/dataset_pagerank.png",
        fragment=f"{REPORT}/sections/10-dataset.md",
    params:
        data=DATA,
        size=SIZE,
    script:
        "../scripts/dataset_report.py"
