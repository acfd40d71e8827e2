# Storage readers against the raw device limit (lsm-gnn bench storage, fio in the same run).
# storage_seconds per reader x pattern x batch size (storage_batch_sizes, storage_seq_batch_sizes)
# plus five fio jobs of fio_seconds each (QD32 random, sequential, three QD1 latency jobs): about a
# minute with the defaults.

REPORT_FRAGMENTS.append(f"{REPORT}/sections/20-storage.md")


def _csv(values):
    return ",".join(str(v) for v in values)


rule storage_bench:
    input:
        DATA_META,
    output:
        f"{RES}/storage/bench.json",
    params:
        cli=CLI,
        data=DATA,
        seconds=config["storage_seconds"],
        batches=_csv(config["storage_batch_sizes"]),
        seq=_csv(config["storage_seq_batch_sizes"]),
        fio=config["fio_seconds"],
    threads: 2  # alone on the machine: throughput is compared with fio's
    log:
        f"{LOGS}/storage_bench.log",
    message:
        "Storage readers vs fio on {params.data} ({params.seconds} s per point)"
    shell:
        "{params.cli} bench storage {params.data} --json --no-progress --seconds {params.seconds} "
        "--batch-sizes {params.batches} --seq-batch-sizes {params.seq} --fio-seconds {params.fio} "
        "--output {output} > {log} 2>&1"


rule storage_report:
    input:
        f"{RES}/storage/bench.json",
    output:
        fragment=f"{REPORT}/sections/20-storage.md",
        figure=f"{REPORT}/figures/storage_throughput.png",
    log:
        f"{LOGS}/storage_report.log",
    message:
        "Storage section of the report"
    script:
        "../scripts/storage_report.py"
