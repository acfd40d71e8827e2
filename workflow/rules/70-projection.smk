# What the measured traffic costs on other hardware (lsm-gnn project, docs/projection.md): the
# baseline records (the emulated-accelerator runs where the matrix has them: their train step is the
# wait, so the CPU training is not in the way) projected on this machine's profile (validation: projected vs measured steady
# epoch per system, with the SSD's figures measured in this run's storage benchmark and the CPU
# figures scaled to the median CPU speed index the records measured around their runs) and on the
# paper's setting (the verdict on its 3.75x over Dist-DGL).

REPORT_FRAGMENTS.append(f"{REPORT}/sections/70-projection.md")


rule projection:
    input:
        runs=BL_EMULATED or BL_REAL,
        storage=f"{RES}/storage/bench.json",  # fio's figures of this run: the SSD of this-machine
    output:
        validate=f"{RES}/projection/validate-this-machine.json",
        paper=f"{RES}/projection/paper.json",
    log:
        f"{LOGS}/projection.log",
    benchmark:
        f"{RES}/benchmarks/projection.tsv"
    conda:
        "../envs/lsm-gnn.yaml"
    threads: 2  # alone on the machine: a record without its own CPU speed index is calibrated now
    resources:
        timed=1,
        mem_mb=1500,
        runtime=10,
    params:
        cli=CLI,
        # emulated runs: the train step is a known wait, the rest is the model's (10 %); real compute: 20 %
        tolerance=0.10 if BL_EMULATED else 0.20,
    message:
        "Projecting the baseline records on this machine (validation) and on the paper's setting"
    shell:
        # --validate exits 1 when lsm or distdgl (the gate: the systems claim (a) compares) is beyond the
        # tolerance: the report says so, the run goes on; it measures the host memory gather here (1-2 s)
        "({params.cli} project --validate {input.runs} --hardware this-machine --storage-from {input.storage} "
        "--tolerance {params.tolerance} "
        "--calibrate-cpu --json > {output.validate} 2> {log} || test -s {output.validate}) && "
        "{params.cli} project {input.runs} --hardware paper --json > {output.paper} 2>> {log}"


rule projection_report:
    input:
        validate=f"{RES}/projection/validate-this-machine.json",
        paper=f"{RES}/projection/paper.json",
        runs=BL_EMULATED or BL_REAL,
        # hybrid at every memory budget and batch (the PVP study): the trend of the paper's batch and the IGB-full figure
        pvp=f"{RES}/cache/pvp.json",
    output:
        fragment=f"{REPORT}/sections/70-projection.md",
        figure=report(
            f"{REPORT}/figures/projection_igb_full.png",
            caption="../report/projection_igb_full.rst",
            category="8. Projection",
        ),
        grid=report(
            f"{RES}/projection/igb_full_grid.csv",
            caption="../report/projection_grid.rst",
            category="8. Projection",
        ),
        paper_range=f"{RES}/projection/paper-range.json",
    log:
        f"{LOGS}/projection_report.log",
    benchmark:
        f"{RES}/benchmarks/projection_report.tsv"
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
        "Projection section of the report"
    script:
        "../scripts/projection_report.py"
