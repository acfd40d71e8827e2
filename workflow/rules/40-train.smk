# Training on one device: the LSM-GNN configuration (O_DIRECT storage + cache_fraction of memory,
# hybrid eviction, W=8, victim buffer) and the in-memory ideal on the same sampler, model and seed.
# train_epochs epochs of train_warmup + train_timed iterations each, the epoch time extrapolated
# (train_timed: null for whole epochs). Defaults on synthetic-small (batch 128): about 1.5 minutes.

REPORT_FRAGMENTS.append(f"{REPORT}/sections/40-train.md")


rule train_run:
    input:
        data=dataset_files(DS),
    output:
        f"{RES}/train/{{system}}.json",
    log:
        f"{LOGS}/train_{{system}}.log",
    benchmark:
        f"{RES}/benchmarks/train_{{system}}.tsv"
    wildcard_constraints:
        system="lsm|memory",
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
        seed=SEED,
        batch=BATCH,
        fanouts=FANOUTS,
        fraction=CACHE_FRACTION,
        window=TRAIN_WINDOW,
        eval_nodes=config["train_eval_nodes"] or "null",
    message:
        "Training {params.model} with the {wildcards.system} configuration ({params.epochs} epochs, batch {params.batch})"
    shell:
        "{params.cli} train --config {wildcards.system} --dataset {params.data} --epochs {params.epochs} "
        "--model {params.model} --seed {params.seed} --batch-size {params.batch} --fanouts {params.fanouts} "
        "--cache-fraction {params.fraction} --set model.hidden={params.hidden} --set train.eval_nodes={params.eval_nodes} "
        "{params.window} "
        "--record {output} --quiet > {log} 2>&1"


rule train_report:
    input:
        records=expand(f"{RES}/train/{{system}}.json", system=TRAIN_SYSTEMS),
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
    message:
        "Training section of the report"
    script:
        "../scripts/train_report.py"
