# Baselines in the same harness: LSM-GNN against isolated caches, the plain mmap and direct loaders,
# the in-memory ideal and Dist-DGL (2 emulated machines x 2 trainers; homogeneous graphs only), every
# one with `lsm-gnn run --system ...` on the same sampler, model and timing window (baselines_warmup +
# baselines_timed iterations per epoch, epoch time extrapolated). Matrix: baselines_systems x
# baselines_devices x baselines_cache, emulated accelerators and real compute (common.smk: BL_*).
# Every run is timed (resource timed=1: no two timed runs overlap at any --cores) and claims both
# cores; the runs form one chain (interleaved and rotated repeats), each waiting for the one before.

REPORT_FRAGMENTS.append(f"{REPORT}/sections/60-baselines.md")


rule baselines_run:
    input:
        data=dataset_files(DS),
        previous=lambda w: bl_previous(f"{RES}/baselines/{w.system}-d{w.devices}-c{w.cache}-{w.mode}-r{w.repeat}.json"),
        owners=lambda w: [owners_folder(w.devices)] if w.system == "lsm" and int(w.devices) > 1 else [],
    output:
        f"{RES}/baselines/{{system}}-d{{devices}}-c{{cache}}-{{mode}}-r{{repeat}}.json",
    log:
        f"{LOGS}/baselines-{{system}}-d{{devices}}-c{{cache}}-{{mode}}-r{{repeat}}.log",
    benchmark:
        f"{RES}/benchmarks/baselines-{{system}}-d{{devices}}-c{{cache}}-{{mode}}-r{{repeat}}.tsv"
    wildcard_constraints:
        system="lsm|isolated|mmap|direct|memory",
        devices=r"\d+",
        repeat=r"\d+",
        mode=r"[A-Za-z0-9_.]+",
    conda:
        "../envs/lsm-gnn.yaml"
    threads: 2
    resources:
        timed=1,
        # measured on synthetic-tiny (0.38 GiB of features, 2 ranks): the in-memory ideal 2.6 GB (a copy
        # of the features per rank: 2x), the cached systems up to 1.9 GB; requested 3.8 and 3.1 GB
        mem_mb=lambda w, input: scaled_mem_mb(input, 3000, 2.0 if w.system == "memory" else 0.3),
        runtime=lambda w, input: scaled_runtime(input, 5, 5),
    params:
        cli=CLI,
        data=data_dir,
        cache=bl_cache,
        sets=bl_run_sets,
        mode_sets=bl_mode_sets,
        owners=owners_set,
    message:
        "Baseline {wildcards.system} on {wildcards.devices} device(s), memory {wildcards.cache}, accelerator "
        "{wildcards.mode} (run {wildcards.repeat})"
    shell:
        "{params.cli} run --system {wildcards.system} --dataset {params.data} "
        "--devices {wildcards.devices} --set cache.capacity_fraction={params.cache} {params.sets} {params.mode_sets} "
        "{params.owners} "
        "--record {output} --no-progress > {log} 2>&1"


rule distdgl_partition:
    input:
        data=dataset_files(DS),
    output:
        directory(f"{RES}/distdgl/partitions-m{{machines}}-t{{trainers}}"),
    log:
        f"{LOGS}/distdgl-partition-m{{machines}}-t{{trainers}}.log",
    benchmark:
        f"{RES}/benchmarks/distdgl-partition-m{{machines}}-t{{trainers}}.tsv"
    wildcard_constraints:
        machines=r"\d+",
        trainers=r"\d+",
    conda:
        "../envs/lsm-gnn.yaml"
    threads: 2
    resources:
        timed=1,
        # METIS over the whole graph: synthetic-small peaks at 10.5 GB (issue 35)
        mem_mb=lambda w, input: scaled_mem_mb(input, 6000, 1.5),
        runtime=lambda w, input: scaled_runtime(input, 8, 8),
    params:
        data=data_dir,
        machines=lambda w: int(w.machines),
        trainers=lambda w: int(w.trainers),
    message:
        "Dist-DGL's partitions for {wildcards.machines} machines x {wildcards.trainers} trainers (partitioned once, "
        "reused by every Dist-DGL run of that layout; their time is in each record)"
    script:
        "../scripts/distdgl_partition.py"


rule baselines_distdgl:
    input:
        data=dataset_files(DS),
        previous=lambda w: bl_previous(f"{RES}/baselines/distdgl-m{w.machines}-t{w.trainers}-{w.mode}-r{w.repeat}.json"),
        partitions=lambda w: distdgl_partitions(w.machines, w.trainers),
    output:
        f"{RES}/baselines/distdgl-m{{machines}}-t{{trainers}}-{{mode}}-r{{repeat}}.json",
    log:
        f"{LOGS}/baselines-distdgl-m{{machines}}-t{{trainers}}-{{mode}}-r{{repeat}}.log",
    benchmark:
        f"{RES}/benchmarks/baselines-distdgl-m{{machines}}-t{{trainers}}-{{mode}}-r{{repeat}}.tsv"
    wildcard_constraints:
        repeat=r"\d+",
        mode=r"[A-Za-z0-9_.]+",
    conda:
        "../envs/lsm-gnn.yaml"
    threads: 2
    resources:
        timed=1,
        # 2 x 2 processes each holding its partition (METIS runs once, in distdgl_partition): the
        # run with METIS inside measured 4.0 GB on synthetic-tiny; kept at that request
        mem_mb=lambda w, input: scaled_mem_mb(input, 6000, 1.5),
        runtime=lambda w, input: scaled_runtime(input, 8, 8),
    params:
        cli=CLI,
        data=data_dir,
        sets=bl_sets,
        mode_sets=bl_mode_sets,
    message:
        "Baseline Dist-DGL on {wildcards.machines} emulated machines x {wildcards.trainers} trainers, accelerator "
        "{wildcards.mode} (run {wildcards.repeat})"
    shell:
        "{params.cli} run --system distdgl --dataset {params.data} --machines {wildcards.machines} "
        "--trainers {wildcards.trainers} --set baseline.partition_dir={input.partitions} {params.sets} {params.mode_sets} "
        "--record {output} --no-progress > {log} 2>&1"


rule baselines_report:
    input:
        runs=BL_RUNS,
        meta=DATA_META,
    output:
        table=report(
            f"{RES}/baselines/summary.csv",
            caption="../report/baselines_summary.rst",
            category="7. Baselines",
        ),
        ratios=f"{RES}/baselines/ratios.json",
        fragment=f"{REPORT}/sections/60-baselines.md",
        epoch=report(
            f"{REPORT}/figures/baselines_epoch.png",
            caption="../report/baselines_epoch.rst",
            category="7. Baselines",
        ),
        first=report(
            f"{REPORT}/figures/baselines_first_epoch.png",
            caption="../report/baselines_first_epoch.rst",
            category="7. Baselines",
        ),
        storage=report(
            f"{REPORT}/figures/baselines_storage.png",
            caption="../report/baselines_storage.rst",
            category="7. Baselines",
        ),
    log:
        f"{LOGS}/baselines_report.log",
    benchmark:
        f"{RES}/benchmarks/baselines_report.tsv"
    conda:
        "../envs/report.yaml"
    threads: 1
    resources:
        mem_mb=REPORT_MEM_MB,
        runtime=REPORT_RUNTIME_MIN,
    params:
        dataset=DS,
        data=meta_dir,
        accelerator=BL_ACC,
        warmup=config["baselines_warmup"],
        timed=config["baselines_timed"],
        fraction=CACHE_FRACTION,
        distdgl=BL_DISTDGL,
    message:
        "Baselines section of the report"
    script:
        "../scripts/baselines_report.py"
