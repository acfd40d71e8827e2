# Multi-device LSM-GNN: shared cache vs isolated caches vs one device with the same total memory,
# 2 devices. The bench replays the first multidevice_batches iterations of the 2-device trace (rule
# cache_trace) through real ranks (the first multidevice_warmup not measured): exact counts of
# storage rows and exchanged bytes. The 2-device epoch times are the baseline matrix's runs of lsm
# (the shared cache) and isolated at cache_fraction (60-baselines.smk: repeated, a new seed per
# round), read from its summary: one home for them. On a cluster each of these jobs asks for the 2
# GPUs its ranks use (profiles/slurm). Defaults on synthetic-small: about half a minute.

REPORT_FRAGMENTS.append(f"{REPORT}/sections/50-multidevice.md")


# The shared cache's per-owner feature files (owner o: rows v % G == o), LSM-GNN's preprocessing as
# METIS is Dist-DGL's: made once for every G-device run that shares a cache, in results/ (never in
# the dataset's folder). Timed: the manifest keeps the build time, which every run reusing the files
# is charged (baselines/harness.py).
rule owner_files:
    input:
        data=dataset_files(DS),
    output:
        directory(f"{RES}/owners-{{devices}}"),
    log:
        f"{LOGS}/owner_files-{{devices}}.log",
    benchmark:
        f"{RES}/benchmarks/owner_files-{{devices}}.tsv"
    wildcard_constraints:
        devices=r"\d+",
    conda:
        "../envs/lsm-gnn.yaml"
    threads: 1
    resources:
        timed=1,
        # a copy of features.bin in 64 MB chunks through a memmap: the resident set stays small
        mem_mb=lambda w, input: scaled_mem_mb(input, 1000, 0.05),
        runtime=lambda w, input: scaled_runtime(input, 3, 3),
    params:
        cli=CLI,
        data=data_dir,
        out=lambda w, output: str(Path(output[0]).parent),
    message:
        "Per-owner feature files for {wildcards.devices} devices"
    shell:
        "{params.cli} dataset owners {params.data} --devices {wildcards.devices} --out {params.out} --no-progress "
        "> {log} 2>&1"


rule multidevice_bench:
    input:
        data=dataset_files(DS),
        trace=f"{RES}/cache/trace-g2.npz",
        owners=owners_folder(2),
    output:
        f"{RES}/multidevice/bench.json",
    log:
        f"{LOGS}/multidevice_bench.log",
    benchmark:
        f"{RES}/benchmarks/multidevice_bench.tsv"
    conda:
        "../envs/lsm-gnn.yaml"
    threads: 2
    resources:
        timed=1,
        mem_mb=lambda w, input: scaled_mem_mb(input, 2500, 0.3),
        runtime=lambda w, input: scaled_runtime(input, 4, 3),
    params:
        cli=CLI,
        data=data_dir,
        batches=config["multidevice_batches"],
        warmup=config["multidevice_warmup"],
        cache=CACHE_FRACTION,
        owners=lambda w, input: str(Path(input.owners).parent),
    message:
        "Replaying {params.batches} iterations of the 2-device trace: shared, isolated, one device"
    shell:
        "{params.cli} bench multidevice {params.data} --devices 2 --trace {input.trace} "
        "--batches {params.batches} --warmup {params.warmup} --cache-fraction {params.cache} --window 8 "
        "--owners-dir {params.owners} --json "
        "--output {output} > /dev/null 2> {log}"


rule multidevice_report:
    input:
        bench=f"{RES}/multidevice/bench.json",
        baselines=f"{RES}/baselines/summary.csv",
        meta=DATA_META,
    output:
        fragment=f"{REPORT}/sections/50-multidevice.md",
        figure=report(
            f"{REPORT}/figures/multidevice.png",
            caption="../report/multidevice.rst",
            category="6. Multi-device",
        ),
    log:
        f"{LOGS}/multidevice_report.log",
    benchmark:
        f"{RES}/benchmarks/multidevice_report.tsv"
    conda:
        "../envs/report.yaml"
    threads: 1
    resources:
        mem_mb=REPORT_MEM_MB,
        runtime=REPORT_RUNTIME_MIN,
    params:
        dataset=DS,
        data=meta_dir,
        cache=CACHE_FRACTION,
        accelerator=BL_ACC,
    message:
        "Multi-device section of the report"
    script:
        "../scripts/multidevice_report.py"
