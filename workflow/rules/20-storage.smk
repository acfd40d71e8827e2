# Storage readers against the raw device limit (lsm-gnn bench storage, fio in the same run).
# storage_repeats rounds (a new seed each, the order rotated) of storage_seconds per reader x pattern
# x batch size (storage_batch_sizes, storage_seq_batch_sizes) and fio's QD32 random and sequential
# jobs (fio_seconds each); then, once, three QD1 latency jobs, the capped-mmap fault and the checksum
# cost: about three minutes with the defaults (190 s on the 2-core VM; one round alone: 75 s).

REPORT_FRAGMENTS.append(f"{REPORT}/sections/20-storage.md")


rule storage_bench:
    input:
        data=dataset_files(DS),
    output:
        f"{RES}/storage/bench.json",
    log:
        f"{LOGS}/storage_bench.log",
    benchmark:
        f"{RES}/benchmarks/storage_bench.tsv"
    conda:
        "../envs/lsm-gnn.yaml"
    threads: 2  # alone on the machine: throughput is compared with fio's
    resources:
        timed=1,
        mem_mb=lambda w, input: scaled_mem_mb(input, 1500, 0),
        runtime=lambda w: storage_runtime(),
    params:
        cli=CLI,
        data=data_dir,
        seconds=config["storage_seconds"],
        batches=csv_list(config["storage_batch_sizes"]),
        seq=csv_list(config["storage_seq_batch_sizes"]),
        fio=config["fio_seconds"],
        repeats=config["storage_repeats"],
    message:
        "Storage readers vs fio on {params.data} ({params.seconds} s per point, {params.repeats} rounds)"
    shell:
        "{params.cli} bench storage {params.data} --json --no-progress --seconds {params.seconds} "
        "--batch-sizes {params.batches} --seq-batch-sizes {params.seq} --fio-seconds {params.fio} "
        "--repeats {params.repeats} --output {output} > {log} 2>&1"


rule storage_report:
    input:
        f"{RES}/storage/bench.json",
    output:
        fragment=f"{REPORT}/sections/20-storage.md",
        figure=report(
            f"{REPORT}/figures/storage_throughput.png",
            caption="../report/storage_throughput.rst",
            category="2. Storage",
        ),
    log:
        f"{LOGS}/storage_report.log",
    benchmark:
        f"{RES}/benchmarks/storage_report.tsv"
    conda:
        "../envs/report.yaml"
    threads: 1
    resources:
        mem_mb=REPORT_MEM_MB,
        runtime=REPORT_RUNTIME_MIN,
    message:
        "Storage section of the report"
    script:
        "../scripts/storage_report.py"
