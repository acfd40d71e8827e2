# The paper's testbed, emulated (issue 33; docs/accelerators.md, "Paper testbed on synthetic-small"):
# lsm, isolated, direct and Dist-DGL at batch 128 and 1024 on the emulated `paper` storage device and
# emulated a100 accelerators, one time scale S for both (and for Dist-DGL's emulated network), 2
# devices, the same feature memory per device for every system. Each run is one `lsm-gnn run` (kill-
# safe: its record is written atomically at its end), timed (no two timed runs overlap) and in one
# chain with the validation runs (common.smk: TB_ORDER). testbed_report computes the three checks
# with bench compare's own validation (lsm_gnn/bench/compare.py) and writes summary.json for the verdicts.

REPORT_FRAGMENTS.extend([f"{REPORT}/sections/65-testbed.md"] if TB_ON else [])


rule testbed_vm_profile:
    input:
        data=dataset_files(DS),
    output:
        TB_VM_PROFILE,
    log:
        f"{LOGS}/testbed-vm-profile.log",
    benchmark:
        f"{RES}/benchmarks/testbed-vm-profile.tsv"
    conda:
        "../envs/lsm-gnn.yaml"
    threads: 2
    resources:
        timed=1,
        mem_mb=1500,
        runtime=10,
    params:
        data=data_dir,
    message:
        "The vm storage profile measured with fio over the feature file (the emulator-vs-real check)"
    script:
        "../scripts/testbed_vm_profile.py"


rule testbed_run:
    input:
        unpack(tb_inputs),
        data=dataset_files(DS),
    output:
        f"{RES}/testbed/runs/{{system}}-b{{batch}}-{{profile}}-s{{scale}}-r{{repeat}}.json",
    log:
        f"{LOGS}/testbed-{{system}}-b{{batch}}-{{profile}}-s{{scale}}-r{{repeat}}.log",
    benchmark:
        f"{RES}/benchmarks/testbed-{{system}}-b{{batch}}-{{profile}}-s{{scale}}-r{{repeat}}.tsv"
    wildcard_constraints:
        system="lsm|isolated|direct|distdgl",
        batch=r"\d+",
        profile="paper|vm|real",
        scale=r"[0-9.]+",
        repeat=r"\d+",
    conda:
        "../envs/lsm-gnn.yaml"
    threads: 2
    resources:
        timed=1,
        # measured on synthetic-small (3.8 GiB of features; max RSS summed over the processes, shared
        # memory counted in each): Dist-DGL 16.2 GB, the cached systems up to 4.7 GB; requested 21.6 and 6.9 GB
        mem_mb=lambda w, input: scaled_mem_mb(
            input, 6000 if w.system == "distdgl" else 3000, 4.0 if w.system == "distdgl" else 1.0
        ),
        runtime=lambda w, input: scaled_runtime(input, 8, 8),
    params:
        cli=CLI,
        data=data_dir,
        topology=tb_topology,
        sets=tb_sets,
    message:
        "Testbed {wildcards.system} at batch {wildcards.batch}, storage {wildcards.profile}, time scale "
        "{wildcards.scale} (run {wildcards.repeat})"
    shell:
        "{params.cli} run --system {wildcards.system} --dataset {params.data} {params.topology} {params.sets} "
        "--record {output} --no-progress > {log} 2>&1"


# Dist-DGL at another host speed f (TB_AT_F: the verdict's class at f = 0.5, 1 and 2)
use rule testbed_run as testbed_run_host_speed with:
    output:
        f"{RES}/testbed/runs/{{system}}-b{{batch}}-{{profile}}-s{{scale}}-f{{host_speed}}-r{{repeat}}.json",
    log:
        f"{LOGS}/testbed-{{system}}-b{{batch}}-{{profile}}-s{{scale}}-f{{host_speed}}-r{{repeat}}.log",
    benchmark:
        f"{RES}/benchmarks/testbed-{{system}}-b{{batch}}-{{profile}}-s{{scale}}-f{{host_speed}}-r{{repeat}}.tsv"
    wildcard_constraints:
        system="distdgl",
        batch=r"\d+",
        profile="paper",
        scale=r"[0-9.]+",
        host_speed=r"[0-9.]+",
        repeat=r"\d+",
    message:
        "Testbed {wildcards.system} at batch {wildcards.batch}, time scale {wildcards.scale}, host speed "
        "{wildcards.host_speed} (run {wildcards.repeat})"


rule testbed_project:
    input:
        runs=TB_PROJECTED,
    output:
        f"{RES}/testbed/projection.json",
    log:
        f"{LOGS}/testbed-project.log",
    benchmark:
        f"{RES}/benchmarks/testbed-project.tsv"
    conda:
        "../envs/lsm-gnn.yaml"
    threads: 1
    resources:
        mem_mb=1500,
        runtime=10,
    params:
        cli=CLI,
    message:
        "LSM-GNN's and Dist-DGL's largest-batch records projected on the machine their emulation had "
        "(bench validate's projection against the emulation)"
    shell:
        "{params.cli} bench validate {input.runs} --json > {output} 2> {log}"


rule testbed_report:
    input:
        runs=TB_ORDER,
        projection=f"{RES}/testbed/projection.json",
        meta=DATA_META,
    output:
        summary=f"{RES}/testbed/summary.json",
        table=report(
            f"{RES}/testbed/summary.csv",
            caption="../report/testbed_summary.rst",
            category="8. Paper testbed (emulated)",
        ),
        figure=report(
            f"{REPORT}/figures/testbed_epoch.png",
            caption="../report/testbed_epoch.rst",
            category="8. Paper testbed (emulated)",
        ),
        fragment=f"{REPORT}/sections/65-testbed.md",
    log:
        f"{LOGS}/testbed_report.log",
    benchmark:
        f"{RES}/benchmarks/testbed_report.tsv"
    conda:
        "../envs/report.yaml"
    threads: 1
    resources:
        mem_mb=REPORT_MEM_MB,
        runtime=REPORT_RUNTIME_MIN,
    params:
        dataset=DS,
        accelerator=TB_ACC,
        time_scale=TB_SCALE,
        system_scales=TB_SYSTEM_SCALES,
        devices=TB_DEVICES,
        fraction=CACHE_FRACTION,
        batches=TB_BATCHES,
        validation_batch=TB_VBATCH,
        host_speed=TB_HOST_SPEED,
    message:
        "Paper-testbed section of the report (emulated)"
    script:
        "../scripts/testbed_report.py"
