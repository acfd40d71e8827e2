# Multi-device LSM-GNN (issue 6): shared cache vs isolated caches vs one device with the same
# total cache, 2 devices. Default (tiny): the bench replays the first MD_BATCHES iterations of the
# 2-device trace (rule cache_trace) through real ranks, plus short 2-rank training runs for the
# epoch time; about 2-3 minutes. --config multidevice_batches=N / multidevice_train_iters=N.

import sys as _md_sys

MD_CLI = str(Path(_md_sys.executable).with_name("lsm-gnn"))
if not Path(MD_CLI).exists():
    MD_CLI = "lsm-gnn"
MD_BATCHES = int(config.get("multidevice_batches") or (12 if SIZE == "tiny" else 40))
MD_TRAIN_ITERS = int(config.get("multidevice_train_iters") or (6 if SIZE == "tiny" else 20))
MD_CACHE = 0.1

REPORT_FRAGMENTS.append(f"{REPORT}/sections/50-multidevice.md")


rule multidevice_bench:
    input:
        data=f"{DATA}/metadata.json",
        trace=f"{RES}/cache/trace-g2.npz",
    output:
        f"{RES}/multidevice/bench.json",
    params:
        cli=MD_CLI,
        data=DATA,
        batches=MD_BATCHES,
        warmup=MD_BATCHES // 2,
        cache=MD_CACHE,
    log:
        f"{RES}/logs/multidevice_bench.log",
    shell:
        "{params.cli} bench multidevice {params.data} --devices 2 --trace {input.trace} "
        "--batches {params.batches} --warmup {params.warmup} --cache-fraction {params.cache} --window 8 --json "
        "--output {output} > /dev/null 2> {log}"


rule multidevice_train:
    input:
        f"{DATA}/metadata.json",
    output:
        f"{RES}/multidevice/train-{{mode}}.json",
    params:
        cli=MD_CLI,
        data=DATA,
        iters=MD_TRAIN_ITERS,
        cache=MD_CACHE,
    wildcard_constraints:
        mode="shared|isolated|one",
    log:
        f"{RES}/logs/multidevice_train-{{mode}}.log",
    run:
        # one device: G x the per-device memory budget (cache and victim buffer split by the same rule),
        # so the total memory equals the 2-device runs'
        devices, mode, cache = (1, "shared", 2 * params.cache) if wildcards.mode == "one" else \
            (2, wildcards.mode, params.cache)
        shell("{params.cli} train --dataset {params.data} --devices {devices} --epochs 1 "
              "--cache-fraction {cache} --set distributed.mode={mode} --set train.eval=false "
              "--set train.timed_iters={params.iters} --record {output} --quiet > {log} 2>&1")


rule multidevice_report:
    input:
        bench=f"{RES}/multidevice/bench.json",
        train=expand(f"{RES}/multidevice/train-{{mode}}.json", mode=["shared", "isolated", "one"]),
    output:
        fragment=f"{REPORT}/sections/50-multidevice.md",
        figure=f"{REPORT}/figures/multidevice.png",
    params:
        size=SIZE,
    script:
        "../scripts/multidevice_report.py"
