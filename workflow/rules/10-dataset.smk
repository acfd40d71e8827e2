# The dataset every other rule reads, by kind (rules/common.smk, `dataset`):
#   synthetic-SIZE / synthetic-hetero-SIZE  generated here (seed, synthetic_dim)
#   igb-SIZE, igbh-SIZE, ogbn-papers100M, mag240m  downloaded (resumable, checksums or sizes
#       checked; `base_url` for a mirror), then prepared into the lsm-gnn format
#   a path                                  used as it is
# then verified in full (sizes, sha256 of every file, ids, CSC/CSR, splits, static scores) and
# described (statistics, degree and PageRank figures). Generation and preparation are checkpoints:
# the data files they write are listed in metadata.json, and every job that reads the dataset
# declares them as inputs (common.smk: dataset_files). synthetic-small: about 1.5 minutes.

REPORT_FRAGMENTS.append(f"{REPORT}/sections/10-dataset.md")


checkpoint dataset_generate:
    output:
        f"{config['data_dir']}/{{synthetic}}/metadata.json",
    log:
        "results/{synthetic}/logs/dataset_generate.log",
    benchmark:
        "results/{synthetic}/dataset/generate.benchmark.tsv"
    wildcard_constraints:
        synthetic="|".join(re.escape(t) for t in SYNTHETIC) or "(?!x)x",
    conda:
        "../envs/lsm-gnn.yaml"
    threads: 1  # the two graphs of the default run generate side by side
    resources:
        mem_mb=lambda w: generate_mem_mb(SYNTHETIC[w.synthetic]),
        runtime=lambda w: generate_runtime(SYNTHETIC[w.synthetic]),
    params:
        cli=CLI,
        out=lambda w, output: str(Path(output[0]).parent),
        size=lambda w: SYNTHETIC[w.synthetic]["size"],
        dim=lambda w: SYNTHETIC[w.synthetic]["dim"],
        hetero=lambda w: "--hetero" if SYNTHETIC[w.synthetic]["hetero"] else "",
        seed=SEED,
    message:
        "Generating the synthetic graph {wildcards.synthetic} (size {params.size}, {params.dim}-dim features)"
    shell:
        # --force: Snakemake has already created the (empty) output folder
        "{params.cli} dataset generate {params.size} --seed {params.seed} {params.hetero} --dim {params.dim} "
        "--out {params.out} --force --no-progress > {log} 2>&1"


if DS["kind"] == "real":

    rule dataset_download:
        output:
            # the download's own completion marker (written last by `lsm-gnn dataset download`)
            f"{DS['raw_root']}/.lsm-gnn-download.json",
        log:
            f"{LOGS}/dataset_download.log",
        benchmark:
            f"{RES}/dataset/download.benchmark.tsv"
        conda:
            "../envs/lsm-gnn.yaml"
        threads: 1
        resources:
            mem_mb=2000,
            runtime=REAL_RUNTIME_MIN,
        params:
            cli=CLI,
            name=DS["real"],
            size=f"--size {DS['size']}" if DS["size"] else "",
            dest=lambda w, output: str(Path(output[0]).parent.parent),
            base_url=f"--base-url {config['base_url']}" if config["base_url"] else "",
        message:
            "Downloading {params.name} {params.size} into {params.dest} (resumable; rerun to continue)"
        shell:
            "{params.cli} dataset download {params.name} {params.size} --dest {params.dest} {params.base_url} "
            "--no-progress > {log} 2>&1"

    checkpoint dataset_prepare:
        input:
            f"{DS['raw_root']}/.lsm-gnn-download.json",
        output:
            DATA_META,
        log:
            f"{LOGS}/dataset_prepare.log",
        benchmark:
            f"{RES}/dataset/prepare.benchmark.tsv"
        conda:
            "../envs/lsm-gnn.yaml"
        threads: 2
        resources:
            mem_mb=8000,
            runtime=REAL_RUNTIME_MIN,
        params:
            cli=CLI,
            name=DS["real"],
            size=f"--size {DS['size']}" if DS["size"] else "",
            raw=lambda w, input: str(Path(input[0]).parent),
            out=lambda w, output: str(Path(output[0]).parent),
        message:
            "Preparing {params.name} from {params.raw} into {params.out} (chunked, resumable)"
        shell:
            # Snakemake creates the output folder; prepare makes it appear only when complete
            "rmdir {params.out} 2>/dev/null; "
            "{params.cli} dataset prepare {params.name} {params.raw} {params.out} {params.size} --no-progress > {log} 2>&1"


rule dataset_verify:
    input:
        data=dataset_files(DS),
        # metadata.json's own checksum, which the full check reads (found undeclared by the unit test)
        sums=dataset_checksum_file(DS),
    output:
        f"{RES}/dataset/verify.txt",
    log:
        f"{LOGS}/dataset_verify.log",
    benchmark:
        f"{RES}/benchmarks/dataset_verify.tsv"
    conda:
        "../envs/lsm-gnn.yaml"
    threads: 1
    resources:
        mem_mb=lambda w, input: scaled_mem_mb(input, 600, 0.1),
        runtime=lambda w, input: scaled_runtime(input, 2, 2),
    params:
        data=data_dir,
        dataset=DS,
        seed=SEED,
    message:
        "Verifying every file of {params.data} against its metadata"
    script:
        "../scripts/dataset_verify.py"


rule dataset_report:
    input:
        data=dataset_files(DS),
        verify=f"{RES}/dataset/verify.txt",
        benchmarks=source_benchmarks(),
    output:
        stats=f"{RES}/dataset/stats.json",
        degree=report(
            f"{REPORT}/figures/dataset_degree.png",
            caption="../report/dataset_degree.rst",
            category="1. Dataset",
        ),
        pagerank=report(
            f"{REPORT}/figures/dataset_pagerank.png",
            caption="../report/dataset_pagerank.rst",
            category="1. Dataset",
        ),
        fragment=f"{REPORT}/sections/10-dataset.md",
    log:
        f"{LOGS}/dataset_report.log",
    benchmark:
        f"{RES}/benchmarks/dataset_report.tsv"
    conda:
        "../envs/report.yaml"
    threads: 1
    resources:
        mem_mb=lambda w, input: scaled_mem_mb(input, 1000, 0.1),
        runtime=lambda w, input: scaled_runtime(input, 2, 1),
    params:
        data=data_dir,
        dataset=DS,
        seed=SEED,
        base_url=config["base_url"],
    message:
        "Describing {params.data}: statistics, degree and PageRank figures"
    script:
        "../scripts/dataset_report.py"


rule dataset:
    input:
        rules.dataset_report.output.fragment,
    params:
        name=DS["name"],
        data=DATA,
    message:
        "Dataset {params.name} ready at {params.data}"
