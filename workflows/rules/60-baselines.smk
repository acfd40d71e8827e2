# Baselines in the same harness (issue 7): LSM-GNN against isolated caches, the plain mmap and
# direct loaders, the in-memory ideal and Dist-DGL (2 emulated machines x 2 trainers), every one
# with `lsm-gnn run --system ...` on the same timing window (warm-up + timed iterations per epoch,
# epoch time extrapolated). Matrix: system x devices x cache fraction. Default (tiny): 2 devices,
# cache 0.1, about 4 minutes. Larger: --config baselines_devices=[1,2] baselines_cache=[0.05,0.1,0.2]
# baselines_warmup=N baselines_timed=N. Every run claims both cores (threads: 2) so that no two
# timed runs share the CPU.

import sys as _bl_sys

BL_CLI = str(Path(_bl_sys.executable).with_name("lsm-gnn"))
if not Path(BL_CLI).exists():
    BL_CLI = "lsm-gnn"
BL_DEVICES = [int(d) for d in config.get("baselines_devices", [2])]
BL_CACHE = [float(c) for c in config.get("baselines_cache", [0.1])]
BL_WARMUP = int(config.get("baselines_warmup", 3 if SIZE == "tiny" else 10))
BL_TIMED = int(config.get("baselines_timed", 5 if SIZE == "tiny" else 20))
BL_CACHED = ["lsm", "isolated", "mmap"]     # systems whose result depends on the cache budget
BL_UNCACHED = ["direct", "memory"]

REPORT_FRAGMENTS.append(f"{REPORT}/sections/60-baselines.md")

BL_RUNS = (
    expand(f"{RES}/baselines/{{system}}-d{{devices}}-c{{cache}}.json", system=BL_CACHED, devices=BL_DEVICES,
           cache=BL_CACHE)
    + expand(f"{RES}/baselines/{{system}}-d{{devices}}-c0.json", system=BL_UNCACHED, devices=BL_DEVICES)
    + [f"{RES}/baselines/distdgl-m2-t2.json"]
)


rule baselines_run:
    input:
        f"{DATA}/metadata.json",
    output:
        f"{RES}/baselines/{{system}}-d{{devices}}-c{{cache}}.json",
    wildcard_constraints:
        system="lsm|isolated|mmap|direct|memory",
        devices=r"\d+",
    threads: 2
    params:
        cli=BL_CLI,
        data=DATA,
        warmup=BL_WARMUP,
        timed=BL_TIMED,
    log:
        f"{RES}/logs/baselines-{{system}}-d{{devices}}-c{{cache}}.log",
    run:
        cache = float(wildcards.cache) or 0.1  # cache-less systems ignore it
        shell("{params.cli} run --system {wildcards.system} --dataset {params.data} "
              "--devices {wildcards.devices} --set cache.capacity_fraction={cache} --set train.epochs=2 "
              "--set train.warmup_iters={params.warmup} --set train.timed_iters={params.timed} "
              "--record {output} --no-progress > {log} 2>&1")


rule baselines_distdgl:
    input:
        f"{DATA}/metadata.json",
    output:
        f"{RES}/baselines/distdgl-m{{machines}}-t{{trainers}}.json",
    threads: 2
    params:
        cli=BL_CLI,
        data=DATA,
        warmup=BL_WARMUP,
        timed=BL_TIMED,
    log:
        f"{RES}/logs/baselines-distdgl-m{{machines}}-t{{trainers}}.log",
    shell:
        "{params.cli} run --system distdgl --dataset {params.data} --machines {wildcards.machines} "
        "--trainers {wildcards.trainers} --set train.epochs=2 --set train.warmup_iters={params.warmup} "
        "--set train.timed_iters={params.timed} --record {output} --no-progress > {log} 2>&1"


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
        size=SIZE,
        warmup=BL_WARMUP,
        timed=BL_TIMED,
    script:
        "../scripts/baselines_report.py"
