# Cache policies against the bounds on one recorded trace (lsm-gnn simulate).
# Default (tiny): all policies x 1/5/10/20 % x W in {4, 8}, one epoch, about 2 minutes.
# Full sweep (W in {2, 4, 8, 16}): --config cache_sweep_size=full, the default for size != tiny.
# cache_max_batches=N cuts each simulated epoch to its first N iterations.

import sys as _cache_sys

# the venv's console script next to the Python that runs Snakemake (PATH may lack the venv)
CACHE_CLI = str(Path(_cache_sys.executable).with_name("lsm-gnn"))
if not Path(CACHE_CLI).exists():
    CACHE_CLI = "lsm-gnn"
CACHE_SWEEP = config.get("cache_sweep_size") or ("quick" if SIZE == "tiny" else "full")
CACHE_WINDOWS = [4, 8] if CACHE_SWEEP == "quick" else [2, 4, 8, 16]
CACHE_FRACTIONS = [0.01, 0.05, 0.10, 0.20]
CACHE_MAX_BATCHES = config.get("cache_max_batches")
CACHE_SAMPLER = {"fanouts": "10,15", "batch_size": 1024, "seed": config.get("seed", 0)}
CACHE_FLAGS = " ".join(f"--cache-fraction {f}" for f in CACHE_FRACTIONS)
# Every fraction is a device's total feature memory (cache lines + victim buffer + landing
# buffer, lsm_gnn.cache.budget); the victim buffer takes the run config's host share of it unless
# cache_victim_depth sets lines per queue (out of the same total).
CACHE_VICTIM = str(config.get("cache_victim_depth") or "config")

REPORT_FRAGMENTS.append(f"{REPORT}/sections/30-cache.md")


rule cache_trace:
    input:
        f"{DATA}/metadata.json",
    output:
        f"{RES}/cache/trace-g{{devices}}.npz",
    params:
        cli=CACHE_CLI,
        data=DATA,
        max_batches=f"--max-batches {CACHE_MAX_BATCHES}" if CACHE_MAX_BATCHES else "",
        **CACHE_SAMPLER,
    log:
        f"{RES}/logs/cache_trace-g{{devices}}.log",
    shell:
        "{params.cli} simulate {params.data} --devices {wildcards.devices} --fanouts {params.fanouts} "
        "--batch-size {params.batch_size} --seed {params.seed} {params.max_batches} "
        "--trace-only --save-trace {output} --no-progress > {log} 2>&1"


rule cache_sweep:
    input:
        data=f"{DATA}/metadata.json",
        trace=f"{RES}/cache/trace-g1.npz",
    output:
        csv=f"{RES}/cache/sweep-W{{window}}.csv",
        json=f"{RES}/cache/sweep-W{{window}}.json",
        record=f"{RES}/cache/sweep-W{{window}}.record.json",
    params:
        cli=CACHE_CLI,
        data=DATA,
        fractions=CACHE_FLAGS,
        victim=CACHE_VICTIM,
    log:
        f"{RES}/logs/cache_sweep-W{{window}}.log",
    shell:
        "{params.cli} simulate {params.data} --trace {input.trace} --policy all {params.fractions} "
        "--window {wildcards.window} --victim-depth {params.victim} --out {output.csv} --record {output.record} --json --no-progress "
        "> {output.json} 2> {log}"


rule cache_multidevice:
    input:
        data=f"{DATA}/metadata.json",
        trace=f"{RES}/cache/trace-g2.npz",
    output:
        csv=f"{RES}/cache/multidevice-{{mode}}.csv",
    params:
        cli=CACHE_CLI,
        data=DATA,
        victim=CACHE_VICTIM,
    log:
        f"{RES}/logs/cache_multidevice-{{mode}}.log",
    shell:
        "{params.cli} simulate {params.data} --trace {input.trace} --mode {wildcards.mode} "
        "--policy hybrid --policy lru --cache-fraction 0.1 --window 8 --victim-depth {params.victim} "
        "--out {output.csv} --no-progress > {log} 2>&1"


rule cache_report:
    input:
        sweeps=expand(f"{RES}/cache/sweep-W{{window}}.csv", window=CACHE_WINDOWS),
        multi=expand(f"{RES}/cache/multidevice-{{mode}}.csv", mode=["shared", "isolated"]),
    output:
        fragment=f"{REPORT}/sections/30-cache.md",
        figure=f"{REPORT}/figures/cache_storage_rows.png",
        table=f"{RES}/cache/summary.csv",
    params:
        size=SIZE,
        sweep=CACHE_SWEEP,
    script:
        "../scripts/cache_report.py"
