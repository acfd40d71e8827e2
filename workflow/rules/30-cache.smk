# Cache policies against the bounds on recorded traces (lsm-gnn simulate), at equal memory: every
# fraction is a device's total feature memory (cache lines + victim buffer + landing buffer,
# lsm_gnn.cache.budget); the victim buffer takes the run config's host share of it unless
# cache_victim_depth sets lines per queue (out of the same total).
#   sweep      all policies x cache_fractions x cache_windows on one trace (batch_size, fanouts); all:
#              the registry's, the installed ones (entry points lsm_gnn.policies) and cache_policies
#   multi      G devices (scaling_devices; 2 the headline), shared vs isolated, hybrid and lru at
#              cache_fraction per device, W = 8
#   regime     all policies at cache_fraction over ratio_batch_sizes: the axis
#              cache_rows_per_iteration_rows along which the policies trade places
#   hetero     all policies on the IGBH-like graph (hetero_size, hetero_dim) at cache_fraction
#   pvp        the victim buffer's regime: hybrid and dynamic, with and without the buffer, over the
#              host tier's share (pvp_host_shares), W (pvp_windows) and batch (pvp_batch_sizes, the
#              run's batch and paper_batch_size always among them), at cache_fraction; plus hybrid
#              over cache_fractions at each batch (the projection's IGB-full figure at the paper's batch)
# The regime and hetero traces are temp(): Snakemake removes them once their replay is done.
# Defaults on synthetic-small: about 6 minutes of simulation in all (pvp: about 2).

REPORT_FRAGMENTS.append(f"{REPORT}/sections/30-cache.md")


rule cache_trace:
    input:
        data=dataset_files(DS),
    output:
        f"{RES}/cache/trace-g{{devices}}.npz",
    log:
        f"{LOGS}/cache_trace-g{{devices}}.log",
    benchmark:
        f"{RES}/benchmarks/cache_trace-g{{devices}}.tsv"
    wildcard_constraints:
        devices=r"\d+",
    conda:
        "../envs/lsm-gnn.yaml"
    threads: 1
    resources:
        mem_mb=lambda w, input: scaled_mem_mb(input, 1000, 0.1),
        runtime=lambda w, input: scaled_runtime(input, 2, 2),
    params:
        cli=CLI,
        data=data_dir,
        max_batches=CACHE_MAX_BATCHES,
        fanouts=FANOUTS,
        batch=BATCH,
        seed=SEED,
    message:
        "Recording the {wildcards.devices}-device request trace of {params.data} (batch {params.batch}, fan-outs {params.fanouts})"
    shell:
        "{params.cli} simulate {params.data} --devices {wildcards.devices} --fanouts {params.fanouts} "
        "--batch-size {params.batch} --seed {params.seed} {params.max_batches} "
        "--trace-only --save-trace {output} --no-progress > {log} 2>&1"


rule cache_sweep:
    input:
        data=dataset_files(DS),
        trace=f"{RES}/cache/trace-g1.npz",
    output:
        csv=f"{RES}/cache/sweep-W{{window}}.csv",
        json=f"{RES}/cache/sweep-W{{window}}.json",
        record=f"{RES}/cache/sweep-W{{window}}.record.json",
    log:
        f"{LOGS}/cache_sweep-W{{window}}.log",
    benchmark:
        f"{RES}/benchmarks/cache_sweep-W{{window}}.tsv"
    conda:
        "../envs/lsm-gnn.yaml"
    threads: 1
    resources:
        mem_mb=lambda w, input: scaled_mem_mb(input, 1000, 0.1),
        runtime=lambda w, input: scaled_runtime(input, 3, 3),
    params:
        cli=CLI,
        data=data_dir,
        fractions=CACHE_FLAGS,
        victim=CACHE_VICTIM,
        policies=POLICY_FLAGS,
    message:
        "Replaying the trace through every policy at W = {wildcards.window}"
    shell:
        "{params.cli} simulate {params.data} --trace {input.trace} {params.policies} {params.fractions} "
        "--window {wildcards.window} --victim-depth {params.victim} --out {output.csv} --record {output.record} "
        "--json --no-progress > {output.json} 2> {log}"


rule cache_pvp:
    input:
        data=dataset_files(DS),
        # the run's batch replays the headline trace; the others sample their own
        trace=lambda w: [f"{RES}/cache/trace-g1.npz"] if int(w.batch) == BATCH else [],
    output:
        csv=f"{RES}/cache/pvp-b{{batch}}.csv",
    log:
        f"{LOGS}/cache_pvp-b{{batch}}.log",
    benchmark:
        f"{RES}/benchmarks/cache_pvp-b{{batch}}.tsv"
    wildcard_constraints:
        batch=r"\d+",
    conda:
        "../envs/lsm-gnn.yaml"
    threads: 1
    resources:
        mem_mb=lambda w, input: scaled_mem_mb(input, 1500, 0.1),
        runtime=lambda w, input: scaled_runtime(input, 5, 5),
    params:
        data=data_dir,
        iterations=lambda w: pvp_iterations(int(w.batch)),
        points=lambda w: pvp_points(int(w.batch)),
        fanouts=FANOUTS,
        seed=SEED,
    message:
        "PVP study at batch {wildcards.batch}: hybrid and dynamic with and without the victim buffer"
    script:
        "../scripts/pvp_study.py"


rule cache_multidevice:
    input:
        data=dataset_files(DS),
        trace=f"{RES}/cache/trace-g{{devices}}.npz",
    output:
        csv=f"{RES}/cache/multidevice-g{{devices}}-{{mode}}.csv",
    log:
        f"{LOGS}/cache_multidevice-g{{devices}}-{{mode}}.log",
    benchmark:
        f"{RES}/benchmarks/cache_multidevice-g{{devices}}-{{mode}}.tsv"
    wildcard_constraints:
        mode="shared|isolated",
        devices=r"\d+",
    conda:
        "../envs/lsm-gnn.yaml"
    threads: 1
    resources:
        mem_mb=lambda w, input: scaled_mem_mb(input, 1000, 0.1),
        runtime=lambda w, input: scaled_runtime(input, 2, 2),
    params:
        cli=CLI,
        data=data_dir,
        victim=CACHE_VICTIM,
        fraction=CACHE_FRACTION,
    message:
        "Simulating {wildcards.devices} device(s) with {wildcards.mode} caches"
    shell:
        "{params.cli} simulate {params.data} --trace {input.trace} --mode {wildcards.mode} "
        "--policy hybrid --policy lru --cache-fraction {params.fraction} --window 8 --victim-depth {params.victim} "
        "--out {output.csv} --no-progress > {log} 2>&1"


rule cache_regime_trace:
    input:
        data=dataset_files(DS),
    output:
        temp(f"{RES}/cache/regime-b{{batch}}.trace.npz"),
    log:
        f"{LOGS}/cache_regime_trace-b{{batch}}.log",
    benchmark:
        f"{RES}/benchmarks/cache_regime_trace-b{{batch}}.tsv"
    wildcard_constraints:
        batch=r"\d+",
    conda:
        "../envs/lsm-gnn.yaml"
    threads: 1
    resources:
        mem_mb=lambda w, input: scaled_mem_mb(input, 1000, 0.1),
        runtime=lambda w, input: scaled_runtime(input, 2, 2),
    params:
        cli=CLI,
        data=data_dir,
        iterations=lambda w: regime_iterations(int(w.batch)),
        fanouts=FANOUTS,
        seed=SEED,
    message:
        "Regime sweep: the trace at batch {wildcards.batch} ({params.iterations} iterations)"
    shell:
        "{params.cli} simulate {params.data} --fanouts {params.fanouts} --batch-size {wildcards.batch} "
        "--seed {params.seed} --max-batches {params.iterations} --trace-only --save-trace {output} "
        "--no-progress > {log} 2>&1"


rule cache_regime:
    input:
        data=dataset_files(DS),
        trace=f"{RES}/cache/regime-b{{batch}}.trace.npz",
    output:
        csv=f"{RES}/cache/regime-b{{batch}}.csv",
        json=f"{RES}/cache/regime-b{{batch}}.json",
    log:
        f"{LOGS}/cache_regime-b{{batch}}.log",
    benchmark:
        f"{RES}/benchmarks/cache_regime-b{{batch}}.tsv"
    wildcard_constraints:
        batch=r"\d+",
    conda:
        "../envs/lsm-gnn.yaml"
    threads: 1
    resources:
        mem_mb=lambda w, input: scaled_mem_mb(input, 1000, 0.1),
        runtime=lambda w, input: scaled_runtime(input, 3, 3),
    params:
        cli=CLI,
        data=data_dir,
        fraction=CACHE_FRACTION,
        victim=CACHE_VICTIM,
        policies=POLICY_FLAGS,
    message:
        "Regime sweep: every policy at batch {wildcards.batch}"
    shell:
        "{params.cli} simulate {params.data} --trace {input.trace} {params.policies} --cache-fraction {params.fraction} "
        "--window 8 --victim-depth {params.victim} --out {output.csv} --json --no-progress > {output.json} 2> {log}"


if HETERO is not None:

    rule cache_hetero_trace:
        input:
            data=dataset_files(HETERO),
        output:
            temp(f"{RES}/cache/hetero.trace.npz"),
        log:
            f"{LOGS}/cache_hetero_trace.log",
        benchmark:
            f"{RES}/benchmarks/cache_hetero_trace.tsv"
        conda:
            "../envs/lsm-gnn.yaml"
        threads: 1
        resources:
            mem_mb=lambda w, input: scaled_mem_mb(input, 1500, 0.1),
            runtime=lambda w, input: scaled_runtime(input, 2, 2),
        params:
            cli=CLI,
            data=data_dir,
            iterations=config["hetero_max_batches"],
            fanouts=FANOUTS,
            batch=BATCH,
            seed=SEED,
        message:
            "The trace of the heterogeneous graph {params.data} (batch {params.batch}, {params.iterations} iterations)"
        shell:
            "{params.cli} simulate {params.data} --fanouts {params.fanouts} --batch-size {params.batch} "
            "--seed {params.seed} --max-batches {params.iterations} --trace-only --save-trace {output} "
            "--no-progress > {log} 2>&1"

    rule cache_hetero:
        input:
            data=dataset_files(HETERO),
            trace=f"{RES}/cache/hetero.trace.npz",
        output:
            csv=f"{RES}/cache/hetero.csv",
            json=f"{RES}/cache/hetero.json",
        log:
            f"{LOGS}/cache_hetero.log",
        benchmark:
            f"{RES}/benchmarks/cache_hetero.tsv"
        conda:
            "../envs/lsm-gnn.yaml"
        threads: 1
        resources:
            mem_mb=lambda w, input: scaled_mem_mb(input, 1000, 0.1),
            runtime=lambda w, input: scaled_runtime(input, 3, 3),
        params:
            cli=CLI,
            data=data_dir,
            fraction=CACHE_FRACTION,
            victim=CACHE_VICTIM,
            policies=POLICY_FLAGS,
        message:
            "Every policy on the heterogeneous graph {params.data}"
        shell:
            "{params.cli} simulate {params.data} --trace {input.trace} {params.policies} --cache-fraction {params.fraction} "
            "--window 8 --victim-depth {params.victim} --out {output.csv} --json --no-progress > {output.json} 2> {log}"


rule cache_report:
    input:
        sweeps=expand(f"{RES}/cache/sweep-W{{window}}.csv", window=config["cache_windows"]),
        multi=expand(f"{RES}/cache/multidevice-g2-{{mode}}.csv", mode=["shared", "isolated"]),
        scaling=expand(
            f"{RES}/cache/multidevice-g{{devices}}-{{mode}}.csv", devices=SCALING_DEVICES, mode=["shared", "isolated"]
        ),
        regime=expand(f"{RES}/cache/regime-b{{batch}}.csv", batch=REGIME_BATCHES),
        hetero=[f"{RES}/cache/hetero.csv"] if HETERO is not None else [],
        # the heterogeneous graph's row count, read beside its CSV
        hetero_json=[f"{RES}/cache/hetero.json"] if HETERO is not None else [],
        # the PVP replays: the policies without the victim buffer, drawn beside the sweep (which has it)
        pvp=expand(f"{RES}/cache/pvp-b{{batch}}.csv", batch=PVP_BATCHES),
    output:
        fragment=f"{REPORT}/sections/30-cache.md",
        figure=report(
            f"{REPORT}/figures/cache_storage_rows.png",
            caption="../report/cache_storage_rows.rst",
            category="3. Cache policies",
        ),
        no_buffer_figure=report(
            f"{REPORT}/figures/cache_policies_no_buffer.png",
            caption="../report/cache_policies_no_buffer.rst",
            category="3. Cache policies",
        ),
        scaling_figure=report(
            f"{REPORT}/figures/cache_scaling.png",
            caption="../report/cache_scaling.rst",
            category="3. Cache policies",
        ),
        regime_figure=report(
            f"{REPORT}/figures/cache_regime.png",
            caption="../report/cache_regime.rst",
            category="3. Cache policies",
        ),
        table=report(
            f"{RES}/cache/summary.csv",
            caption="../report/cache_summary.rst",
            category="3. Cache policies",
        ),
        regime=f"{RES}/cache/regime.json",
    log:
        f"{LOGS}/cache_report.log",
    benchmark:
        f"{RES}/benchmarks/cache_report.tsv"
    conda:
        "../envs/report.yaml"
    threads: 1
    resources:
        mem_mb=REPORT_MEM_MB,
        runtime=REPORT_RUNTIME_MIN,
    params:
        dataset=DS,
        hetero=HETERO,
        batch=BATCH,
        fanouts=FANOUTS,
        fraction=CACHE_FRACTION,
        windows=config["cache_windows"],
        regime_seeds=config["ratio_seeds"],
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
        figure=report(
            f"{REPORT}/figures/cache_pvp.png",
            caption="../report/cache_pvp.rst",
            category="4. Victim buffer (PVP)",
        ),
        summary=f"{RES}/cache/pvp.json",
    log:
        f"{LOGS}/pvp_report.log",
    benchmark:
        f"{RES}/benchmarks/pvp_report.tsv"
    conda:
        "../envs/report.yaml"
    threads: 1
    resources:
        mem_mb=REPORT_MEM_MB,
        runtime=REPORT_RUNTIME_MIN,
    params:
        dataset=DS,
        fraction=CACHE_FRACTION,
        shares=PVP_SHARES,
        windows=PVP_WINDOWS,
        batches=PVP_BATCHES,
        config_share=PVP_CONFIG_SHARE,
    message:
        "PVP section of the report: the victim buffer's regime"
    script:
        "../scripts/pvp_report.py"
