# Baselines in the same harness: LSM-GNN against isolated caches, the plain mmap and direct loaders,
# the in-memory ideal and Dist-DGL (2 emulated machines x 2 trainers; homogeneous graphs only), every
# one with `lsm-gnn run --system ...` on the same sampler, model and timing window (baselines_warmup +
# baselines_timed iterations per epoch, epoch time extrapolated). Matrix: baselines_systems x
# baselines_devices x baselines_cache. Every run claims both cores (threads: 2) so that no two timed runs share the CPU.
# Defaults on synthetic-small (2 runs of each): about 8 minutes.

REPORT_FRAGMENTS.append(f"{REPORT}/sections/60-baselines.md")

# systems whose result depends on the memory budget, and those that hold no cache
BL_CACHED = [s for s in ("lsm", "isolated", "mmap") if s in config["baselines_systems"]]
BL_UNCACHED = [s for s in ("direct", "memory") if s in config["baselines_systems"]]
BL_DISTDGL = bool(config["baselines_distdgl"]) and not DS["hetero"]
BL_SETS = (f"--set sampler.batch_size={BATCH} --set 'sampler.fanouts={FANOUT_LIST}' --set model.name={MODEL} "
           f"--set train.seed={SEED} --set train.epochs=2 --set train.warmup_iters={config['baselines_warmup']} "
           f"--set train.timed_iters={config['baselines_timed']}")

# every run `baselines_repeats` times (suffix -rK): on a shared VM one run of a command can be 40 %
# off the next; the report and the projection's validation take the mean and show the spread
BL_REPEATS = list(range(int(config["baselines_repeats"])))
BL_RUNS = (
    expand(f"{RES}/baselines/{{system}}-d{{devices}}-c{{cache}}-r{{repeat}}.json", system=BL_CACHED,
           devices=config["baselines_devices"], cache=config["baselines_cache"], repeat=BL_REPEATS)
    + expand(f"{RES}/baselines/{{system}}-d{{devices}}-c0-r{{repeat}}.json", system=BL_UNCACHED,
             devices=config["baselines_devices"], repeat=BL_REPEATS)
    + (expand(f"{RES}/baselines/distdgl-m2-t2-r{{repeat}}.json", repeat=BL_REPEATS) if BL_DISTDGL else [])
)


rule baselines_run:
    input:
        DATA_META,
    output:
        f"{RES}/baselines/{{system}}-d{{devices}}-c{{cache}}-r{{repeat}}.json",
    wildcard_constraints:
        system="lsm|isolated|mmap|direct|memory",
        devices=r"\d+",
        repeat=r"\d+",
    threads: 2
    params:
        cli=CLI,
        data=DATA,
        sets=BL_SETS,
    log:
        f"{LOGS}/baselines-{{system}}-d{{devices}}-c{{cache}}-r{{repeat}}.log",
    message:
        "Baseline {wildcards.system} on {wildcards.devices} device(s), memory {wildcards.cache} (run {wildcards.repeat})"
    run:
        cache = float(wildcards.cache) or CACHE_FRACTION  # cache-less systems ignore it
        shell("{params.cli} run --system {wildcards.system} --dataset {params.data} "
              "--devices {wildcards.devices} --set cache.capacity_fraction={cache} {params.sets} "
              "--record {output} --no-progress > {log} 2>&1")


rule baselines_distdgl:
    input:
        DATA_META,
    output:
        f"{RES}/baselines/distdgl-m{{machines}}-t{{trainers}}-r{{repeat}}.json",
    wildcard_constraints:
        repeat=r"\d+",
    threads: 2
    params:
        cli=CLI,
        data=DATA,
        sets=BL_SETS,
    log:
        f"{LOGS}/baselines-distdgl-m{{machines}}-t{{trainers}}-r{{repeat}}.log",
    message:
        "Baseline Dist-DGL on {wildcards.machines} emulated machines x {wildcards.trainers} trainers (run {wildcards.repeat})"
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
