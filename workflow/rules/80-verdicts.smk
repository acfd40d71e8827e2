# The report's opening: the verdict on each claim of the paper (workflow/scripts/verdicts.py) and
# the files a second run is compared with (`lsm-gnn report compare`, docs/workflow.md):
#   figures    figures.json, every hardware-independent figure (simulator and dataset counts, the
#              verdicts on claims b-d); its rules run no timed job, so `snakemake figures` alone
#              reproduces it in minutes
#   verdicts   the verdicts section: a sentence per claim and the claims figure, then one column per kind of evidence (claim a from the emulated matrix,
#              the testbed when it ran and the projection; e from the 2-device runs), timings.json
#              (every timed figure with its runs and spread) and machine.json (this machine)


rule figures:
    input:
        data=dataset_files(DS),
        sweep=f"{RES}/cache/summary.csv",
        regime=f"{RES}/cache/regime.json",
        multi=expand(f"{RES}/cache/multidevice-g2-{{mode}}.csv", mode=["shared", "isolated"]),
        scaling=expand(
            f"{RES}/cache/multidevice-g{{devices}}-{{mode}}.csv", devices=SCALING_DEVICES, mode=["shared", "isolated"]
        ),
        pvp=f"{RES}/cache/pvp.json",
    output:
        figures=f"{REPORT}/figures.json",
    log:
        f"{LOGS}/figures.log",
    benchmark:
        f"{RES}/benchmarks/figures.tsv"
    conda:
        "../envs/report.yaml"
    threads: 1
    resources:
        mem_mb=REPORT_MEM_MB,
        runtime=REPORT_RUNTIME_MIN,
    params:
        data=data_dir,
        batch=BATCH,
        fraction=CACHE_FRACTION,
        config_share=PVP_CONFIG_SHARE,
        config=config,
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
        testbed=[f"{RES}/testbed/summary.json"] if TB_ON else [],
        multidevice=f"{RES}/multidevice/bench.json",
    output:
        fragment=report(
            f"{REPORT}/sections/00-verdicts.md",
            caption="../report/verdicts.rst",
            category="0. Verdicts",
        ),
        timings=f"{REPORT}/timings.json",
        machine=f"{REPORT}/machine.json",
        figure=report(
            f"{REPORT}/figures/claims.png",
            caption="../report/claims.rst",
            category="0. Verdicts",
        ),
    log:
        f"{LOGS}/verdicts.log",
    benchmark:
        f"{RES}/benchmarks/verdicts.tsv"
    conda:
        "../envs/report.yaml"
    threads: 1
    resources:
        mem_mb=REPORT_MEM_MB,
        runtime=REPORT_RUNTIME_MIN,
    params:
        batch=BATCH,
        paper_batch=PAPER_BATCH,
    message:
        "Verdicts on the paper's claims"
    script:
        "../scripts/verdicts_report.py"
