# Multi-device LSM-GNN: shared cache vs isolated caches vs one device with the same total memory,
# 2 devices. The bench replays the first multidevice_batches iterations of the 2-device trace (rule
# cache_trace) through real ranks (the first multidevice_warmup not measured), plus short 2-rank
# training runs (multidevice_train_warmup + multidevice_train_iters iterations) for the iteration time.
# Defaults on synthetic-small: about 3 minutes.

REPORT_FRAGMENTS.append(f"{REPORT}/sections/50-multidevice.md")


rule multidevice_bench:
    input:
        data=DATA_META,
        trace=f"{RES}/cache/trace-g2.npz",
    output:
        f"{RES}/multidevice/bench.json",
    params:
        cli=CLI,
        data=DATA,
        batches=config["multidevice_batches"],
        warmup=config["multidevice_warmup"],
        cache=CACHE_FRACTION,
    threads: 2
    log:
        f"{LOGS}/multidevice_bench.log",
    message:
        "Replaying {params.batches} iterations of the 2-device trace: shared, isolated, one device"
    shell:
        "{params.cli} bench multidevice {params.data} --devices 2 --trace {input.trace} "
        "--batches {params.batches} --warmup {params.warmup} --cache-fraction {params.cache} --window 8 --json "
        "--output {output} > /dev/null 2> {log}"


rule multidevice_train:
    input:
        DATA_META,
    output:
        f"{RES}/multidevice/train-{{mode}}.json",
    params:
        cli=CLI,
        data=DATA,
        warmup=config["multidevice_train_warmup"],
        iters=config["multidevice_train_iters"],
        cache=CACHE_FRACTION,
        model=MODEL,
        batch=BATCH,
        fanouts=FANOUTS,
        seed=SEED,
    wildcard_constraints:
        mode="shared|isolated|one",
    threads: 2
    log:
        f"{LOGS}/multidevice_train-{{mode}}.log",
    message:
        "Short 2-rank training run: {wildcards.mode}"
    run:
        # one device: G x the per-device memory budget (cache and victim buffer split by the same rule),
        # so the total memory equals the 2-device runs'
        devices, mode, cache = (1, "shared", 2 * params.cache) if wildcards.mode == "one" else \
            (2, wildcards.mode, params.cache)
        shell("{params.cli} train --dataset {params.data} --devices {devices} --epochs 1 --model {params.model} "
              "--batch-size {params.batch} --fanouts {params.fanouts} --seed {params.seed} "
              "--cache-fraction {cache} --set distributed.mode={mode} --set train.eval=false "
              "--warmup {params.warmup} --timed {params.iters} --record {output} --quiet > {log} 2>&1")


rule multidevice_report:
    input:
        bench=f"{RES}/multidevice/bench.json",
        train=expand(f"{RES}/multidevice/train-{{mode}}.json", mode=["shared", "isolated", "one"]),
    output:
        fragment=f"{REPORT}/sections/50-multidevice.md",
        figure=f"{REPORT}/figures/multidevice.png",
    params:
        dataset=DS,
        data=DATA,
    log:
        f"{LOGS}/multidevice_report.log",
    message:
        "Multi-device section of the report"
    script:
        "../scripts/multidevice_report.py"
