# Training on one device: the LSM-GNN configuration (O_DIRECT storage + cache_fraction of memory,
# hybrid eviction, W=8, victim buffer) and the in-memory ideal on the same sampler, model and seed.
# train_epochs epochs of train_warmup + train_timed iterations each, the epoch time extrapolated
# (train_timed: null for whole epochs). Defaults on synthetic-small (batch 128): about 1.5 minutes.

REPORT_FRAGMENTS.append(f"{REPORT}/sections/40-train.md")

TRAIN_SYSTEMS = ["lsm", "memory"]
_TRAIN_WINDOW = (f"--warmup {config['train_warmup']}" if config["train_timed"] is None else
                 f"--warmup {config['train_warmup']} --timed {config['train_timed']}")


rule train_run:
    input:
        DATA_META,
    output:
        f"{RES}/train/{{system}}.json",
    wildcard_constraints:
        system="lsm|memory",
    params:
        cli=CLI,
        data=DATA,
        epochs=config["train_epochs"],
        hidden=config["train_hidden"],
        model=MODEL,
        seed=SEED,
        batch=BATCH,
        fanouts=FANOUTS,
        fraction=CACHE_FRACTION,
        window=_TRAIN_WINDOW,
        eval_nodes=config["train_eval_nodes"] or "null",
    threads: 2  # alone on the machine: epoch times are compared
    log:
        f"{LOGS}/train_{{system}}.log",
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
    output:
        table=f"{RES}/train/summary.csv",
        time_fig=f"{REPORT}/figures/train_epoch_time.png",
        acc_fig=f"{REPORT}/figures/train_accuracy.png",
        fragment=f"{REPORT}/sections/40-train.md",
    params:
        dataset=DS,
        data=DATA,
    log:
        f"{LOGS}/train_report.log",
    message:
        "Training section of the report"
    script:
        "../scripts/train_report.py"
