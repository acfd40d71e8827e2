# Cache policies against the bounds on recorded traces (lsm-gnn simulate), at equal memory: every
# fraction is a device's total feature memory (cache lines + victim buffer + landing buffer,
# lsm_gnn.cache.budget); the victim buffer takes the run config's host share of it unless
# cache_victim_depth sets lines per queue (out of the same total).
#   sweep      all policies x cache_fractions x cache_windows on one trace (batch_size, fanouts)
#   multi      2 devices, shared vs isolated, hybrid and lru at cache_fraction, W = 8
#   regime     all policies at cache_fraction over ratio_batch_sizes: the axis
#              cache_rows_per_iteration_rows along which the policies trade places
#   hetero     all policies on the IGBH-like graph (hetero_size, hetero_dim) at cache_fraction
#   pvp        the victim buffer's regime: hybrid and dynamic, with and without the buffer, over the
#              host tier's share (pvp_host_shares), W (pvp_windows) and batch (pvp_batch_sizes, the
#              run's batch and paper_batch_size always among them), at cache_fraction; plus hybrid
#              over cache_fractions at each batch (the projection's IGB-full figure at the paper's batch)
# Defaults on synthetic-small: about 6 minutes of simulation in all (pvp: about 2).

REPORT_FRAGMENTS.append(f"{REPORT}/sections/30-cache.md")

CACHE_VICTIM = str(config["cache_victim_depth"] or "config")
CACHE_FLAGS = " ".join(f"--cache-fraction {f}" for f in config["cache_fractions"])
CACHE_MAX_BATCHES = f"--max-batches {config['cache_max_batches']}" if config["cache_max_batches"] else ""
REGIME_BATCHES = [int(b) for b in config["ratio_batch_sizes"]]
PAPER_BATCH = int(config["paper_batch_size"])
PVP_BATCHES = sorted({int(b) for b in config["pvp_batch_sizes"]} | {BATCH, PAPER_BATCH})
PVP_SHARES = sorted({float(h) for h in config["pvp_host_shares"] if float(h) > 0})
PVP_WINDOWS = sorted({int(w) for w in config["pvp_windows"]} | {8})
# the run config's host share (lsm_gnn.config: VictimBufferConfig.host_fraction, None = the policy's 0.10)
PVP_CONFIG_SHARE = 0.1


def regime_iterations(batch: int) -> int:
    """Iterations of the regime point at `batch`: ratio_seeds seed nodes, at least 20."""
    return max(20, int(config["ratio_seeds"]) // batch)


rule cache_trace:
    input:
        DATA_META,
    output:
        f"{RES}/cache/trace-g{{devices}}.npz",
    wildcard_constraints:
        devices=r"\d+",
    params:
        cli=CLI,
        data=DATA,
        max_batches=CACHE_MAX_BATCHES,
        fanouts=FANOUTS,
        batch=BATCH,
        seed=SEED,
    log:
        f"{LOGS}/cache_trace-g{{devices}}.log",
    message:
        "Recording the {wildcards.devices}-device request trace of {params.data} (batch {params.batch}, fan-outs {params.fanouts})"
    shell:
        "{params.cli} simulate {params.data} --devices {wildcards.devices} --fanouts {params.fanouts} "
        "--batch-size {params.batch} --seed {params.seed} {params.max_batches} "
        "--trace-only --save-trace {output} --no-progress > {log} 2>&1"


rule cache_sweep:
    input:
        data=DATA_META,
        trace=f"{RES}/cache/trace-g1.npz",
    output:
        csv=f"{RES}/cache/sweep-W{{window}}.csv",
        json=f"{RES}/cache/sweep-W{{window}}.json",
        record=f"{RES}/cache/sweep-W{{window}}.record.json",
    params:
        cli=CLI,
        data=DATA,
        fractions=CACHE_FLAGS,
        victim=CACHE_VICTIM,
    log:
        f"{LOGS}/cache_sweep-W{{window}}.log",
    message:
        "Replaying the trace through every policy at W = {wildcards.window}"
    shell:
        "{params.cli} simulate {params.data} --trace {input.trace} --policy all {params.fractions} "
        "--window {wildcards.window} --victim-depth {params.victim} --out {output.csv} --record {output.record} "
        "--json --no-progress > {output.json} 2> {log}"


def pvp_iterations(batch: int) -> int:
    """Iterations of the PVP study's trace at `batch`: the seeds of the headline trace
    (cache_max_batches x batch_size), at least 20; the headline trace itself at batch_size."""
    headline = int(config["cache_max_batches"] or 300)
    return max(20, headline * BATCH // batch)


def pvp_points(batch: int) -> list[dict]:
    """The configurations of the PVP study at one batch: hybrid and dynamic without the buffer at
    every W (static at W = 8); with it at each host share (W = 8; every W at the config's share); hybrid over
    cache_fractions (W = 8, the config's share). Each is one `lsm-gnn simulate` row."""
    pts = [dict(policy=p, fraction=CACHE_FRACTION, window=w, victim=False, host=None)
           for p in ("hybrid", "dynamic") for w in PVP_WINDOWS]
    # static without the buffer (it reads no window): claim (c) without the buffer
    pts.append(dict(policy="static", fraction=CACHE_FRACTION, window=8, victim=False, host=None))
    for h in sorted(set(PVP_SHARES) | {PVP_CONFIG_SHARE}):
        for w in (PVP_WINDOWS if h == PVP_CONFIG_SHARE else [8]):
            pts += [dict(policy=p, fraction=CACHE_FRACTION, window=w, victim=True, host=h) for p in ("hybrid", "dynamic")]
    pts += [dict(policy="hybrid", fraction=float(f), window=8, victim=True, host=PVP_CONFIG_SHARE)
            for f in config["cache_fractions"] if abs(float(f) - CACHE_FRACTION) > 1e-12]
    return pts


rule cache_pvp:
    input:
        data=DATA_META,
        # the run's batch replays the headline trace; the others sample their own
        trace=lambda w: [f"{RES}/cache/trace-g1.npz"] if int(w.batch) == BATCH else [],
    output:
        csv=f"{RES}/cache/pvp-b{{batch}}.csv",
    wildcard_constraints:
        batch=r"\d+",
    params:
        data=DATA,
        iterations=lambda w: pvp_iterations(int(w.batch)),
        points=lambda w: pvp_points(int(w.batch)),
        fanouts=FANOUTS,
        seed=SEED,
    threads: 1
    log:
        f"{LOGS}/cache_pvp-b{{batch}}.log",
    message:
        "PVP study at batch {wildcards.batch}: hybrid and dynamic with and without the victim buffer"
    script:
        "../scripts/pvp_study.py"


rule cache_multidevice:
    input:
        data=DATA_META,
        trace=f"{RES}/cache/trace-g2.npz",
    output:
        csv=f"{RES}/cache/multidevice-{{mode}}.csv",
    wildcard_constraints:
        mode="shared|isolated",
    params:
        cli=CLI,
        data=DATA,
        victim=CACHE_VICTIM,
        fraction=CACHE_FRACTION,
    log:
        f"{LOGS}/cache_multidevice-{{mode}}.log",
    message:
        "Simulating 2 devices with {wildcards.mode} caches"
    shell:
        "{params.cli} simulate {params.data} --trace {input.trace} --mode {wildcards.mode} "
        "--policy hybrid --policy lru --cache-fraction {params.fraction} --window 8 --victim-depth {params.victim} "
        "--out {output.csv} --no-progress > {log} 2>&1"


rule cache_regime:
    input:
        DATA_META,
    output:
        csv=f"{RES}/cache/regime-b{{batch}}.csv",
        json=f"{RES}/cache/regime-b{{batch}}.json",
    wildcard_constraints:
        batch=r"\d+",
    params:
        cli=CLI,
        data=DATA,
        trace=f"{RES}/cache/regime-b{{batch}}.trace.npz",
        iterations=lambda w: regime_iterations(int(w.batch)),
        fanouts=FANOUTS,
        seed=SEED,
        fraction=CACHE_FRACTION,
        victim=CACHE_VICTIM,
    log:
        f"{LOGS}/cache_regime-b{{batch}}.log",
    message:
        "Regime sweep: every policy at batch {wildcards.batch} ({params.iterations} iterations)"
    shell:
        "{params.cli} simulate {params.data} --fanouts {params.fanouts} --batch-size {wildcards.batch} "
        "--seed {params.seed} --max-batches {params.iterations} --trace-only --save-trace {params.trace} "
        "--no-progress > {log} 2>&1 && "
        "{params.cli} simulate {params.data} --trace {params.trace} --policy all --cache-fraction {params.fraction} "
        "--window 8 --victim-depth {params.victim} --out {output.csv} --json --no-progress > {output.json} 2>> {log} && "
        "rm -f {params.trace}"


if HETERO is not None:

    rule cache_hetero:
        input:
            f"{HETERO['data']}/metadata.json",
        output:
            csv=f"{RES}/cache/hetero.csv",
            json=f"{RES}/cache/hetero.json",
        params:
            cli=CLI,
            data=HETERO["data"],
            trace=f"{RES}/cache/hetero.trace.npz",
            iterations=config["hetero_max_batches"],
            fanouts=FANOUTS,
            batch=BATCH,
            seed=SEED,
            fraction=CACHE_FRACTION,
            victim=CACHE_VICTIM,
        log:
            f"{LOGS}/cache_hetero.log",
        message:
            "Every policy on the heterogeneous graph {params.data} (batch {params.batch}, {params.iterations} iterations)"
        shell:
            "{params.cli} simulate {params.data} --fanouts {params.fanouts} --batch-size {params.batch} "
            "--seed {params.seed} --max-batches {params.iterations} --trace-only --save-trace {params.trace} "
            "--no-progress > {log} 2>&1 && "
            "{params.cli} simulate {params.data} --trace {params.trace} --policy all --cache-fraction {params.fraction} "
            "--window 8 --victim-depth {params.victim} --out {output.csv} --json --no-progress > {output.json} 2>> {log} && "
            "rm -f {params.trace}"


rule cache_report:
    input:
        sweeps=expand(f"{RES}/cache/sweep-W{{window}}.csv", window=config["cache_windows"]),
        multi=expand(f"{RES}/cache/multidevice-{{mode}}.csv", mode=["shared", "isolated"]),
        regime=expand(f"{RES}/cache/regime-b{{batch}}.csv", batch=REGIME_BATCHES),
        hetero=[f"{RES}/cache/hetero.csv"] if HETERO is not None else [],
    output:
        fragment=f"{REPORT}/sections/30-cache.md",
        figure=f"{REPORT}/figures/cache_storage_rows.png",
        regime_figure=f"{REPORT}/figures/cache_regime.png",
        table=f"{RES}/cache/summary.csv",
        regime=f"{RES}/cache/regime.json",
    params:
        dataset=DS,
        hetero=HETERO,
        batch=BATCH,
        fanouts=FANOUTS,
        fraction=CACHE_FRACTION,
        windows=config["cache_windows"],
        regime_seeds=config["ratio_seeds"],
    log:
        f"{LOGS}/cache_report.log",
    message:
        "Cache section of the report: policies against the bounds, the regime sweep"
    script:
        "../scripts/cache_report.py"


REPORT_FRAGMENTS.append(f"{REPORT}/sections/35-pvp.md")


rule pvp_report:
    input:
        csvs=expand(f"{RES}/cache/pvp-b{{batch}}.csv", batch=PVP_BATCHES),
    output:
        fragment=f"{REPORT}/sections/35-pvp.md",
        figure=f"{REPORT}/figures/cache_pvp.png",
        summary=f"{RES}/cache/pvp.json",
    params:
        dataset=DS,
        fraction=CACHE_FRACTION,
        shares=PVP_SHARES,
        windows=PVP_WINDOWS,
        batches=PVP_BATCHES,
        config_share=PVP_CONFIG_SHARE,
    log:
        f"{LOGS}/pvp_report.log",
    message:
        "PVP section of the report: the victim buffer's regime"
    script:
        "../scripts/pvp_report.py"
