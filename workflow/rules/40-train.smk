# Training on one device: the LSM-GNN configuration (O_DIRECT storage + cache_fraction of memory,
# hybrid eviction, W=8, victim buffer) and the in-memory ideal on the same sampler, model and seed.
# train_epochs epochs of train_warmup + train_timed iterations each, the epoch time extrapolated
# (train_timed: null for whole epochs). train_repeats rounds, a new seed per round, the systems
# rotated (common.smk: TRAIN_ORDER); the report takes medians and shows the min-max. Defaults on
# synthetic-small (batch 128): about 13 s per run on an idle machine, about 2.2 minutes for the 10.

REPORT_FRAGMENTS.append(f"{REPORT}/sections/40-train.md")


rule train_run:
    input:
        data=dataset_files(DS),
        previous=train_previous,
    output:
        f"{RES}/train/{{system}}-r{{repeat}}.json",
    log:
        f"{LOGS}/train_{{system}}-r{{repeat}}.log",
    benchmark:
        f"{RES}/benchmarks/train_{{system}}-r{{repeat}}.tsv"
    wildcard_constraints:
        system="lsm|memory",
        repeat=r"\d+",
    conda:
        "../envs/lsm-gnn.yaml"
    threads: 2  # alone on the machine: epoch times are compared
    resources:
        timed=1,
        # the in-memory ideal holds every feature row in memory (synthetic-tiny: 1.08 GB measured, lsm 0.87 GB)
        mem_mb=lambda w, input: scaled_mem_mb(input, 2500, 1.0 if w.system == "memory" else 0.2),
        runtime=lambda w, input: scaled_runtime(input, 5, 4),
    params:
        cli=CLI,
        data=data_dir,
        epochs=config["train_epochs"],
        hidden=config["train_hidden"],
        model=MODEL,
        seed=train_seed,
        batch=BATCH,
        fanouts=FANOUTS,
        fraction=CACHE_FRACTION,
        window=TRAIN_FLAGS,
        eval_nodes=config["train_eval_nodes"] or "null",
    message:
        "Training {params.model} with the {wildcards.system} configuration ({params.epochs} epochs, batch {params.batch}, "
        "run {wildcards.repeat})"
    shell:
        "{params.cli} train --config {wildcards.system} --dataset {params.data} --epochs {params.epochs} "
        "--model {params.model} --seed {params.seed} --batch-size {params.batch} --fanouts {params.fanouts} "
        "--cache-fraction {params.fraction} --set model.hidden={params.hidden} --set train.eval_nodes={params.eval_nodes} "
        "{params.window} "
        "--record {output} --quiet > {log} 2>&1"


rule train_report:
    input:
        records=TRAIN_ORDER,
        meta=DATA_META,
    output:
        table=report(
            f"{RES}/train/summary.csv",
            caption="../report/train_summary.rst",
            category="5. Training on one device",
        ),
        time_fig=report(
            f"{REPORT}/figures/train_epoch_time.png",
            caption="../report/train_epoch_time.rst",
            category="5. Training on one device",
        ),
        acc_fig=report(
            f"{REPORT}/figures/train_accuracy.png",
            caption="../report/train_accuracy.rst",
            category="5. Training on one device",
        ),
        fragment=f"{REPORT}/sections/40-train.md",
    log:
        f"{LOGS}/train_report.log",
    benchmark:
        f"{RES}/benchmarks/train_report.tsv"
    conda:
        "../envs/report.yaml"
    threads: 1
    resources:
        mem_mb=REPORT_MEM_MB,
        runtime=REPORT_RUNTIME_MIN,
    params:
        dataset=DS,
        data=meta_dir,
        seed=SEED,
    message:
        "Training section of the report"
    script:
        "../scripts/train_report.py"
