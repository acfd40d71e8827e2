# Baselines in the same harness: LSM-GNN against isolated caches, the plain mmap and direct loaders,
# the in-memory ideal and Dist-DGL (2 emulated machines x 2 trainers; homogeneous graphs only), every
# one with `lsm-gnn run --system ...` on the same sampler, model and timing window (baselines_warmup +
# baselines_timed iterations per epoch, epoch time extrapolated). Matrix: baselines_systems x
# baselines_devices x baselines_cache, emulated accelerators and real compute. Every run claims both
# cores (threads: 2) so that no two timed runs share the CPU.

REPORT_FRAGMENTS.append(f"{REPORT}/sections/60-baselines.md")

# systems whose result depends on the memory budget, and those that hold no cache
BL_CACHED = [s for s in ("lsm", "isolated", "mmap") if s in config["baselines_systems"]]
BL_UNCACHED = [s for s in ("direct", "memory") if s in config["baselines_systems"]]
BL_DISTDGL = bool(config["baselines_distdgl"]) and not DS["hetero"]
BL_SETS = (f"--set sampler.batch_size={BATCH} --set 'sampler.fanouts={FANOUT_LIST}' --set model.name={MODEL} "
           f"--set train.seed={SEED} --set train.epochs=2 --set train.warmup_iters={config['baselines_warmup']} "
           f"--set train.timed_iters={config['baselines_timed']}")
# Emulated accelerators (lsm_gnn.accelerator, after MLPerf Storage): each train step is a wait of
# the profile's GPU step time, so the systems' data planes are compared as they would feed a GPU,
# not the 2 cores' CPU training. `baselines_repeats` emulated runs of every system, interleaved and
# rotated (ABC, BCA, CAB: a slow quarter hour of the VM falls on every system alike); then
# `baselines_real_runs` runs that really train, for the loss and accuracy. No accelerator: only
# real runs (`baselines_repeats` of them).
BL_ACC = config["baselines_accelerator"]
BL_EMU_SETS = f"--set train.accelerator=emulated --set train.accelerator_profile={BL_ACC}" if BL_ACC else ""
BL_MODES = ([(BL_ACC, int(config["baselines_repeats"]))] if BL_ACC else []) + \
    [("real", int(config["baselines_real_runs"]) if BL_ACC else int(config["baselines_repeats"]))]
BL_CONFIGS = ([f"{s}-d{d}-c{c}" for s in BL_CACHED for d in config["baselines_devices"] for c in config["baselines_cache"]]
              + [f"{s}-d{d}-c0" for s in BL_UNCACHED for d in config["baselines_devices"]]
              + (["distdgl-m2-t2"] if BL_DISTDGL else []))
# every run in the order it runs: one chain, so that Snakemake cannot regroup the repeats of a system
BL_ORDER = [f"{RES}/baselines/{BL_CONFIGS[(r + i) % len(BL_CONFIGS)]}-{mode}-r{r}.json"
            for mode, n in BL_MODES for r in range(n) for i in range(len(BL_CONFIGS))]
BL_PREVIOUS = dict(zip(BL_ORDER[1:], BL_ORDER[:-1]))
BL_RUNS = BL_ORDER
BL_EMULATED = [p for p in BL_ORDER if BL_ACC and f"-{BL_ACC}-r" in p]
BL_REAL = [p for p in BL_ORDER if "-real-r" in p]


def bl_previous(wildcards, output):
    """The run before this one in BL_ORDER (none for the first)."""
    prev = BL_PREVIOUS.get(output[0])
    return [prev] if prev else []


def bl_mode_sets(wildcards):
    return BL_EMU_SETS if wildcards.mode != "real" else ""


rule baselines_run:
    input:
        DATA_META,
        previous=lambda w: bl_previous(w, [f"{RES}/baselines/{w.system}-d{w.devices}-c{w.cache}-{w.mode}-r{w.repeat}.json"]),
    output:
        f"{RES}/baselines/{{system}}-d{{devices}}-c{{cache}}-{{mode}}-r{{repeat}}.json",
    wildcard_constraints:
        system="lsm|isolated|mmap|direct|memory",
        devices=r"\d+",
        repeat=r"\d+",
        mode=r"[A-Za-z0-9_.]+",
    threads: 2
    params:
        cli=CLI,
        data=DATA,
        sets=BL_SETS,
        mode_sets=bl_mode_sets,
    log:
        f"{LOGS}/baselines-{{system}}-d{{devices}}-c{{cache}}-{{mode}}-r{{repeat}}.log",
    message:
        "Baseline {wildcards.system} on {wildcards.devices} device(s), memory {wildcards.cache}, accelerator "
        "{wildcards.mode} (run {wildcards.repeat})"
    run:
        cache = float(wildcards.cache) or CACHE_FRACTION  # cache-less systems ignore it
        shell("{params.cli} run --system {wildcards.system} --dataset {params.data} "
              "--devices {wildcards.devices} --set cache.capacity_fraction={cache} {params.sets} {params.mode_sets} "
              "--record {output} --no-progress > {log} 2>&1")


rule baselines_distdgl:
    input:
        DATA_META,
        previous=lambda w: bl_previous(w, [f"{RES}/baselines/distdgl-m{w.machines}-t{w.trainers}-{w.mode}-r{w.repeat}.json"]),
    output:
        f"{RES}/baselines/distdgl-m{{machines}}-t{{trainers}}-{{mode}}-r{{repeat}}.json",
    wildcard_constraints:
        repeat=r"\d+",
        mode=r"[A-Za-z0-9_.]+",
    threads: 2
    params:
        cli=CLI,
        data=DATA,
        sets=BL_SETS,
        mode_sets=bl_mode_sets,
    log:
        f"{LOGS}/baselines-distdgl-m{{machines}}-t{{trainers}}-{{mode}}-r{{repeat}}.log",
    message:
        "Baseline Dist-DGL on {wildcards.machines} emulated machines x {wildcards.trainers} trainers, accelerator "
        "{wildcards.mode} (run {wildcards.repeat})"
    shell:
        "{params.cli} run --system distdgl --dataset {params.data} --machines {wildcards.machines} "
        "--trainers {wildcards.trainers} {params.sets} {params.mode_sets} --record {output} --no-progress > {log} 2>&1"


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
        accelerator=BL_ACC,
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
