# Storage readers against the raw device limit (lsm-gnn bench storage, fio in the same run).
# Default: 1 s per reader x pattern x batch size plus two 3 s fio jobs, under a minute on tiny.
# --config storage_seconds=S sets the time per point.

import sys as _storage_sys

STORAGE_CLI = str(Path(_storage_sys.executable).with_name("lsm-gnn"))
if not Path(STORAGE_CLI).exists():
    STORAGE_CLI = "lsm-gnn"
STORAGE_SECONDS = float(config.get("storage_seconds", 1.0))

REPORT_FRAGMENTS.append(f"{REPORT}/sections/20-storage.md")


rule storage_bench:
    input:
        f"{DATA}/metadata.json",
    output:
        f"{RES}/storage/bench.json",
    params:
        cli=STORAGE_CLI,
        data=DATA,
        seconds=STORAGE_SECONDS,
    log:
        f"{RES}/logs/storage_bench.log",
    shell:
        "{params.cli} bench storage {params.data} --json --no-progress --seconds {params.seconds} "
        "--batch-sizes 256,1024,4096,16384 --seq-batch-sizes 4096,16384 --fio-seconds 3 "
        "--output {output} > {log} 2>&1"


rule storage_report:
    input:
        f"{RES}/storage/bench.json",
    output:
        fragment=f"{REPORT}/sections/20-storage.md",
        figure=f"{REPORT}/figures/storage_throughput.png",
    script:
        "../scripts/storage_report.py"
