# Training on one device: the LSM-GNN configuration (O_DIRECT storage + 10% cache, hybrid
# eviction, W=8, victim buffer) and the in-memory ideal on the same sampler, model and seed.
# Default (tiny): GraphSAGE, batch 1024, fan-outs 10,15, hidden 128, 3 whole epochs per system,
# about 2-3 minutes in all. Keys: train_epochs, train_hidden, train_model, train_timed
# (time only N iterations per epoch after train_warmup, extrapolated; default for size != tiny: 50).

import sys as _train_sys

TRAIN_CLI = str(Path(_train_sys.executable).with_name("lsm-gnn"))
if not Path(TRAIN_CLI).exists():
    TRAIN_CLI = "lsm-gnn"
TRAIN_SYSTEMS = ["lsm", "memory"]
TRAIN_EPOCHS = config.get("train_epochs", 3)
TRAIN_HIDDEN = config.get("train_hidden", 128)
TRAIN_MODEL = config.get("train_model", "sage")
TRAIN_TIMED = config.get("train_timed", None if SIZE == "tiny" else 50)
TRAIN_WARMUP = config.get("train_warmup", 0 if TRAIN_TIMED is None else 20)
_TRAIN_WINDOW = "" if TRAIN_TIMED is None else f"--warmup {TRAIN_WARMUP} --timed {TRAIN_TIMED}"

REPORT_FRAGMENTS.append(f"{REPORT}/sections/40-train.md")


rule train_run:
    input:
        f"{DATA}/metadata.json",
    output:
        f"{RES}/train/{{system}}.json",
    wildcard_constraints:
        system="lsm|memory",
    params:
        cli=TRAIN_CLI,
        data=DATA,
        epochs=TRAIN_EPOCHS,
        hidden=TRAIN_HIDDEN,
        model=TRAIN_MODEL,
        seed=config.get("seed", 0),
        window=_TRAIN_WINDOW,
    threads: 2  # alone on the machine: epoch times are compared
    log:
        f"{RES}/logs/train_{{system}}.log",
    shell:
        "{params.cli} train --config {wildcards.system} --dataset {params.data} --epochs {params.epochs} "
        "--model {params.model} --seed {params.seed} --set model.hidden={params.hidden} {params.window} "
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
        size=SIZE,
    script:
        "../scripts/train_report.py"
