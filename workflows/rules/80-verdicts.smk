# The report's opening: the verdict on each claim of the paper (workflows/scripts/verdicts.py) and
# the files a second run is compared with (`lsm-gnn report compare`, docs/workflow.md):
#   figures    figures.json, every hardware-independent figure (simulator and dataset counts, the
#              verdicts on claims b-d); its rules run no timed job, so `snakemake figures` alone
#              reproduces it in minutes
#   verdicts   the verdicts section (claim a from the emulated matrix and the projection), timings.json
#              (every timed figure with its runs and spread) and machine.json (this machine)


rule figures:
    input:
        meta=DATA_META,
        sweep=f"{RES}/cache/summary.csv",
        regime=f"{RES}/cache/regime.json",
        multi=expand(f"{RES}/cache/multidevice-{{mode}}.csv", mode=["shared", "isolated"]),
        pvp=f"{RES}/cache/pvp.json",
    output:
        figures=f"{REPORT}/figures.json",
    params:
        data=DATA,
        batch=BATCH,
        fraction=CACHE_FRACTION,
        config_share=PVP_CONFIG_SHARE,
        config=config,
    log:
        f"{LOGS}/figures.log",
    message:
        "The report's hardware-independent figures (figures.json)"
    script:
        "../scripts/figures_report.py"


rule verdicts:
    input:
        figures=f"{REPORT}/figures.json",
        summary=f"{RES}/baselines/summary.csv",
        ratios=f"{RES}/baselines/ratios.json",
        paper_range=f"{RES}/projection/paper-range.json",
    output:
        fragment=f"{REPORT}/sections/00-verdicts.md",
        timings=f"{REPORT}/timings.json",
        machine=f"{REPORT}/machine.json",
    params:
        batch=BATCH,
        paper_batch=PAPER_BATCH,
    log:
        f"{LOGS}/verdicts.log",
    message:
        "Verdicts on the paper's claims"
    script:
        "../scripts/verdicts_report.py"
