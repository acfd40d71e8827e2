# The dataset every other rule reads, by kind (rules/common.smk, `dataset`):
#   synthetic-SIZE / synthetic-hetero-SIZE  generated here (seed, synthetic_dim)
#   igb-SIZE, igbh-SIZE, ogbn-papers100M, mag240m  downloaded (resumable, checksums or sizes
#       checked; `base_url` for a mirror), then prepared into the lsm-gnn format
#   a path                                  used as it is
# then verified in full (sizes, sha256 of every file, ids, CSC/CSR, splits, static scores) and
# described (statistics, degree and PageRank figures). synthetic-small: about 1.5 minutes.

REPORT_FRAGMENTS.append(f"{REPORT}/sections/10-dataset.md")


rule dataset_generate:
    output:
        f"{config['data_dir']}/{{synthetic}}/metadata.json",
    wildcard_constraints:
        synthetic="|".join(re.escape(t) for t in SYNTHETIC) or "(?!x)x",
    params:
        cli=CLI,
        out=lambda w: f"{config['data_dir']}/{w.synthetic}",
        size=lambda w: SYNTHETIC[w.synthetic]["size"],
        dim=lambda w: SYNTHETIC[w.synthetic]["dim"],
        hetero=lambda w: "--hetero" if SYNTHETIC[w.synthetic]["hetero"] else "",
        seed=SEED,
    log:
        "results/{synthetic}/logs/dataset_generate.log",
    benchmark:
        "results/{synthetic}/dataset/generate.benchmark.tsv"
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
        params:
            cli=CLI,
            name=DS["real"],
            size=f"--size {DS['size']}" if DS["size"] else "",
            dest=DS["raw"],
            base_url=f"--base-url {config['base_url']}" if config["base_url"] else "",
        log:
            f"{LOGS}/dataset_download.log",
        benchmark:
            f"{RES}/dataset/download.benchmark.tsv"
        message:
            "Downloading {params.name} {params.size} into {params.dest} (resumable; rerun to continue)"
        shell:
            "{params.cli} dataset download {params.name} {params.size} --dest {params.dest} {params.base_url} "
            "--no-progress > {log} 2>&1"

    rule dataset_prepare:
        input:
            f"{DS['raw_root']}/.lsm-gnn-download.json",
        output:
            DATA_META,
        params:
            cli=CLI,
            name=DS["real"],
            size=f"--size {DS['size']}" if DS["size"] else "",
            raw=DS["raw_root"],
            out=DATA,
        log:
            f"{LOGS}/dataset_prepare.log",
        benchmark:
            f"{RES}/dataset/prepare.benchmark.tsv"
        message:
            "Preparing {params.name} from {params.raw} into {params.out} (chunked, resumable)"
        shell:
            # Snakemake creates the output folder; prepare makes it appear only when complete
            "rmdir {params.out} 2>/dev/null; "
            "{params.cli} dataset prepare {params.name} {params.raw} {params.out} {params.size} --no-progress > {log} 2>&1"


def _source_benchmarks(_wildcards=None):
    if DS["kind"] == "synthetic":
        return [f"{RES}/dataset/generate.benchmark.tsv"]
    if DS["kind"] == "real":
        return [f"{RES}/dataset/download.benchmark.tsv", f"{RES}/dataset/prepare.benchmark.tsv"]
    return []


rule dataset_verify:
    input:
        DATA_META,
    output:
        f"{RES}/dataset/verify.txt",
    params:
        data=DATA,
        dataset=DS,
        seed=SEED,
    log:
        f"{LOGS}/dataset_verify.log",
    message:
        "Verifying every file of {params.data} against its metadata"
    script:
        "../scripts/dataset_verify.py"


rule dataset_report:
    input:
        meta=DATA_META,
        verify=f"{RES}/dataset/verify.txt",
        benchmarks=_source_benchmarks(),
    output:
        stats=f"{RES}/dataset/stats.json",
        degree=f"{REPORT}/figures/dataset_degree.png",
        pagerank=f"{REPORT}/figures/dataset_pagerank.png",
        fragment=f"{REPORT}/sections/10-dataset.md",
    params:
        data=DATA,
        dataset=DS,
        seed=SEED,
        base_url=config["base_url"],
    log:
        f"{LOGS}/dataset_report.log",
    message:
        "Describing {params.data}: statistics, degree and PageRank figures"
    script:
        "../scripts/dataset_report.py"


rule dataset:
    input:
        rules.dataset_report.output.fragment,
    message:
        "Dataset {params.name} ready at {params.data}"
    params:
        name=DS["name"],
        data=DATA,
