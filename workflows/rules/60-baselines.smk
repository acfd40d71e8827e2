# Baselines in the same harness: LSM-GNN against isolated caches, the plain mmap and direct loaders,
# the in-memory ideal and Dist-DGL (2 emulated machines x 2 trainers; homogeneous graphs only), every
# one with `lsm-gnn run --system ...` on the same sampler, model and timing window (baselines_warmup +
# baselines_timed iterations per epoch, epoch time extrapolated). Matrix: baselines_systems x
# baselines_devices x baselines_cache. Every run claims both cores (threads: 2) so that no two timed runs share the CPU.
# Defaults on synthetic-small: about 5 minutes.

REPORT_FRAGMENTS.append(f"{REPORT}/sections/60-baselines.md")

# systems whose result depends on the memory budget, and those that hold no cache
BL_CACHED = [s for s in ("lsm", "isolated", "mmap") if s in config["baselines_systems"]]
BL_UNCACHED = [s for s in ("direct", "memory") if s in config["baselines_systems"]]
BL_DISTDGL = bool(config["baselines_distdgl"]) and not DS["hetero"]
BL_SETS = (f"--set sampler.batch_size={BATCH} --set 'sampler.fanouts={FANOUT_LIST}' --set model.name={MODEL} "
           f"--set train.seed={SEED} --set train.epochs=2 --set train.warmup_iters={config['baselines_warmup']} "
           f"--set train.timed_iters={config['baselines_timed']}")

BL_RUNS = (
    expand(f"{RES}/baselines/{{system}}-d{{devices}}-c{{cache}}.json", system=BL_CACHED,
           devices=config["baselines_devices"], cache=config["baselines_cache"])
    + expand(f"{RES}/baselines/{{system}}-d{{devices}}-c0.json", system=BL_UNCACHED,
             devices=config["baselines_devices"])
    + ([f"{RES}/baselines/distdgl-m2-t2.json"] if BL_DISTDGL else [])
)


rule baselines_run:
    input:
        DATA_META,
    output:
        f"{RES}/baselines/{{system}}-d{{devices}}-c{{cache}}.json",
    wildcard_constraints:
        system="lsm|isolated|mmap|direct|memory",
        devices=r"\d+",
    threads: 2
    params:
        cli=CLI,
        data=DATA,
        sets=BL_SETS,
    log:
        f"{LOGS}/baselines-{{system}}-d{{devices}}-c{{cache}}.log",
    message:
        "Baseline {wildcards.system} on {wildcards.devices} device(s), memory {wildcards.cache}"
    run:
        cache = float(wildcards.cache) or CACHE_FRACTION  # cache-less systems ignore it
        shell("{params.cli} run --system {wildcards.system} --dataset {params.data} "
              "--devices {wildcards.devices} --set cache.capacity_fraction={cache} {params.sets} "
              "--record {output} --no-progress > {log} 2>&1")


rule baselines_distdgl:
    input:
        DATA_META,
    output:
        f"{RES}/baselines/distdgl-m{{machines}}-t{{trainers}}.json",
    threads: 2
    params:
        cli=CLI,
        data=DATA,
        sets=BL_SETS,
    log:
        f"{LOGS}/baselines-distdgl-m{{machines}}-t{{trainers}}.log",
    message:
        "Baseline Dist-DGL on {wildcards.machines} emulated machines x {wildcards.trainers} trainers"
    shell:
        "{params.cli} run --system distdgl --dataset {params.data} --machines {wildcards.machines} "
        "--trainers {wildcards.trainers} {params.sets} --record {output} --no-progress > {log} 2>&1"


rule baselines_report:
    input:
        BL_RUNS,
    output:
        table=f"{RES}/baselines/summary.csv",
        ratios=f"{RES}/baselines/ratios.json",
        fragment=f"{REPORT}/sections/60-baselines.md",
        epoch=f"{REPORT}/figures/baselines_epoch.png",
        first=f"{REPORT}/figures/baselines_first_epoch.png",
        storage=f"{REPORT}/figures/baselines_storage.png",
    params:
        dataset=DS,
        data=DATA,
        warmup=config["baselines_warmup"],
        timed=config["baselines_timed"],
        fraction=CACHE_FRACTION,
        distdgl=BL_DISTDGL,
    log:
        f"{LOGS}/baselines_report.log",
    message:
        "Baselines section of the report"
    script:
        "../scripts/baselines_report.py"
