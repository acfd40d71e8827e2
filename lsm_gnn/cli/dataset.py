"""`lsm-gnn dataset ...`: generate synthetic datasets, download and prepare real ones, verify and
describe a dataset directory (format: docs/dataset-format.md; usage: docs/datasets.md)."""

from __future__ import annotations

import json
import time

import click

from lsm_gnn.utils.outpaths import output_option
from lsm_gnn.utils.seeds import SEED_MAX

# Real datasets handled by lsm_gnn.datasets.real (name -> (sizes, description)).
REAL_DATASETS = {
    "igb": (("tiny", "small", "medium", "large", "full"),
            "IGB homogeneous citation graph (papers, 1024-dim fp32, 19/2983 classes)"),
    "igbh": (("tiny", "small", "medium", "large", "full"),
             "IGBH heterogeneous (paper/author/institute/fos[/journal/conference]); IGBH-full is MLPerf's"),
    "ogbn-papers100M": ((), "OGB papers100M: 111M papers, 128-dim fp32, 172 classes, about 1.4% labelled"),
    "mag240m": ((), "OGB-LSC MAG240M: 244M nodes, paper features 768-dim fp16, 153 classes"),
}
SYNTHETIC_SIZES_HELP = "tiny (100k papers), small (1M), medium (10M) or a node count"


def _names_help() -> str:
    lines = [f"  {name:<16} {desc}" + (f" [sizes: {', '.join(sizes)}]" if sizes else "")
             for name, (sizes, desc) in REAL_DATASETS.items()]
    return "\n".join(lines)


@click.group(help="Datasets in the lsm-gnn on-disk format (docs/datasets.md).\n\n\b\n"
             "Synthetic (generated here, no download; `generate SIZE`):\n"
             f"  synthetic        IGB-like graph: {SYNTHETIC_SIZES_HELP}\n"
             "Your own graph: `import --edges FILE --out DIR` (.npy, .csv, .tsv, DGL)\n"
             "Real (`download NAME`, then `prepare NAME RAW_DIR OUT_DIR`):\n" + _names_help())
def dataset():
    pass


@dataset.command("list")
def list_datasets():
    """Show the dataset names and sizes that generate / download / prepare accept."""
    click.echo(f"synthetic (lsm-gnn dataset generate SIZE): {SYNTHETIC_SIZES_HELP}")
    click.echo("real (lsm-gnn dataset download NAME, then prepare):")
    click.echo(_names_help())


@dataset.command()
@click.argument("size", default="tiny")
@click.option("--seed", default=0, show_default=True, type=click.IntRange(0, SEED_MAX), help="RNG seed.")
@click.option("--hetero", is_flag=True, help="IGBH-like heterogeneous graph (paper/author/fos/institute).")
@click.option("--dim", default=1024, show_default=True, type=click.IntRange(min=1), help="Feature dimension.")
@click.option("--dtype", default="float32", show_default=True,
              type=click.Choice(["float32", "float16", "float64"]), help="Feature dtype.")
@click.option("--classes", default=19, show_default=True, type=click.IntRange(2, 65535), help="Number of classes.")
@click.option("--avg-degree", default=12.07, show_default=True, type=click.FloatRange(min=0, min_open=True),
              help="Target mean degree (IGB-small: 12.07; IGB-tiny without self loops: 4.47).")
@click.option("--out", type=click.Path(file_okay=False), default=None,
              help="Output directory [default: data/synthetic[-hetero]-SIZE].")
@click.option("--pagerank", "pagerank", default=None,
              help="PageRank normalisation of the static scores: in-degree (the authors' compute_pagerank, "
                   "the default) or out-degree (textbook); recorded in metadata.json `static`.")
@click.option("--force", is_flag=True, help="Replace the output directory if it exists.")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
def generate(size, seed, hetero, dim, dtype, classes, avg_degree, out, pagerank, force, no_progress):
    """Generate a synthetic IGB-like dataset. SIZE: tiny (100k papers), small (1M), medium (10M)
    or a node count."""
    from lsm_gnn.datasets.synthetic import generate as gen, resolve_size

    size_name, _ = resolve_size(size)
    out = out or f"data/synthetic{'-hetero' if hetero else ''}-{size_name}"
    t0 = time.perf_counter()
    ds = gen(out, size, seed=seed, heterogeneous=hetero, feature_dim=dim, feature_dtype=dtype,
             num_classes=classes, avg_degree=avg_degree, overwrite=force, progress=not no_progress,
             pagerank=pagerank)
    secs = time.perf_counter() - t0
    lay = ds.features()
    click.echo(f"wrote {ds.root}: {ds.num_nodes():,} nodes, {ds.num_edges():,} edges, "
               f"{lay.file_bytes / 2**30:.2f} GiB of features in {secs:.1f} s")


@dataset.command("import")
@click.option("--edges", required=True, type=click.Path(dir_okay=False),
              help="Edge list: .npy (E, 2) or (2, E), .csv / .tsv (two integer columns, optional header), "
                   "or a DGL graph file (.bin / .dgl).")
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Output dataset directory.")
@click.option("--features", type=click.Path(dir_okay=False),
              help="Features: .npy (N, dim), or raw rows with --feature-dtype and --feature-dim. "
                   "Default: seeded random rows of --feature-dim (128) (marked in the metadata).")
@click.option("--feature-dtype", type=click.Choice(["float32", "float16", "float64"]), default=None,
              help="Dtype of raw feature rows (default float32); for a .npy, the dtype to store.")
@click.option("--feature-dim", type=click.IntRange(min=1), default=None,
              help="Row width of raw feature rows; without --features, the random rows' width [default: 128].")
@click.option("--labels", type=click.Path(dir_okay=False),
              help=".npy of integer classes, -1 = unlabelled. Default: seeded random placeholder classes.")
@click.option("--num-classes", type=click.IntRange(min=1), default=None,
              help="Number of classes [default: largest label + 1; 2 for placeholder labels].")
@click.option("--splits", default=None, metavar="TRAIN,VAL,TEST",
              help="Three .npy files of node ids (or boolean masks), comma-separated.")
@click.option("--split-fractions", default=None, metavar="F,F,F",
              help="Seeded random split of the labelled nodes [default: 0.6,0.2,0.2].")
@click.option("--seed", default=0, show_default=True, type=click.IntRange(0, SEED_MAX),
              help="Seed of the random splits, placeholder labels and random features.")
@click.option("--num-nodes", type=click.IntRange(min=1), default=None,
              help="Node count [default: from the DGL graph, the feature rows, the labels, else largest id + 1].")
@click.option("--undirected", is_flag=True, help="Store every edge in both directions (each pair once).")
@click.option("--name", default=None, help="Dataset name [default: the output directory's name].")
@click.option("--force", is_flag=True, help="Replace the output directory if it exists.")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
def import_(edges, out, features, feature_dtype, feature_dim, labels, num_classes, splits, split_fractions, seed,
            num_nodes, undirected, name, force, no_progress):
    """Import your own graph (edge list, optional features, labels and splits) into the lsm-gnn
    format at --out, with CSC/CSR, PageRank bytes and degrees (docs/datasets.md, "Your own graph")."""
    from lsm_gnn.datasets.importer import import_graph

    t0 = time.perf_counter()
    ds = import_graph(out, edges, features=features, feature_dtype=feature_dtype, feature_dim=feature_dim,
                      labels=labels, num_classes=num_classes, splits=splits, split_fractions=split_fractions,
                      seed=seed, num_nodes=num_nodes, undirected=undirected, name=name, overwrite=force,
                      progress=not no_progress)
    secs = time.perf_counter() - t0
    lay = ds.features()
    click.echo(f"wrote {ds.root}: {ds.num_nodes():,} nodes, {ds.num_edges():,} edges, "
               f"{lay.num_rows:,} x {lay.dim} {lay.dtype.name} features, {ds.num_classes} classes, splits "
               + "/".join(f"{ds.meta['splits'][k]:,}" for k in ("train", "val", "test")) + f" in {secs:.1f} s")
    src = ds.meta["source"]
    if src["features"].get("random"):
        click.echo("  note: no --features: seeded random feature rows stand in (no signal)")
    if labels is None:
        click.echo("  note: no --labels: seeded random placeholder classes stand in (accuracies mean nothing)")


@dataset.command()
@click.argument("path", type=click.Path(file_okay=False))
@click.option("--quick", is_flag=True, help="Skip the sha256, the non-finite scan and the padding check of "
              "features.bin (every row is still checked against its xxh3 checksum: one read of the file).")
@click.option("--write-checksums", is_flag=True, help="Upgrade an older dataset: after a full check that finds no "
              "error, add the row checksums (features.xxh3.npy) and metadata.sha256.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object instead of text.")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
def verify(path, quick, write_checksums, as_json, no_progress):
    """Check every file of the dataset at PATH against its metadata.json. Exit status 1 if any
    error is found (warnings, such as an older dataset without checksums, leave it 0); each
    problem is reported under its file."""
    import sys

    from lsm_gnn.datasets.verify import errors
    from lsm_gnn.datasets.verify import verify as run_verify
    from lsm_gnn.datasets.verify import write_checksums as upgrade

    show = not no_progress and sys.stderr.isatty()
    if write_checksums:
        if quick:
            raise click.UsageError("--write-checksums runs the full check first; drop --quick")
        blocked = upgrade(path, progress=show)
        if blocked:
            click.echo(f"{path}: not upgraded: the full check found {len(blocked)} error(s)")
        else:
            click.echo(f"{path}: row checksums and metadata.sha256 written")
    problems = run_verify(path, quick=quick, progress=show)
    bad = errors(problems)
    if as_json:
        click.echo(json.dumps({"path": path, "quick": quick, "ok": not bad,
                               "problems": [{"file": p.file, "message": p.message, "severity": p.severity}
                                            for p in problems]}, indent=2))
    elif not problems:
        click.echo(f"{path}: OK ({'quick' if quick else 'full'} check)")
    else:
        click.echo(f"{path}: {len(problems)} problem(s)")
        last = None
        for p in problems:
            if p.file != last:
                click.echo(f"  {p.file}")
                last = p.file
            click.echo(f"    - {p.message}" if p.severity == "error" else f"    - warning: {p.message}")
    if bad:
        raise SystemExit(1)


@dataset.command()
@click.argument("path", type=click.Path(exists=True, file_okay=False))
@click.option("--devices", required=True, type=click.IntRange(min=2), help="Number of owners G (devices).")
@click.option("--out", type=click.Path(file_okay=False), default=None, callback=output_option("into", "owners folder"),
              help="Folder under which owners-G/ is written [default: the dataset's folder].")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
def owners(path, devices, out, no_progress):
    """Write the shared cache's per-owner feature files of the dataset at PATH (owner o: rows v with
    v % G == o), each atomically, with a manifest tying them to features.bin; current ones are kept."""
    from lsm_gnn.multidevice.owner_files import ensure_owner_files, owner_dir
    from lsm_gnn.datasets.format import Dataset

    ds = Dataset(path)
    layouts = ensure_owner_files(ds, devices, out_dir=out, progress=not no_progress)
    click.echo(f"{owner_dir(ds, devices, out)}: {devices} owner files, "
               f"{sum(la.file_bytes for la in layouts) / 2**20:.1f} MiB")


@dataset.command()
@click.argument("path", type=click.Path(exists=True, file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="One JSON object instead of text.")
def info(path, as_json):
    """Counts, degree and PageRank statistics, homophily and bytes of the dataset at PATH."""
    from lsm_gnn.datasets.format import Dataset
    from lsm_gnn.datasets.stats import summary

    s = summary(Dataset(path))
    if as_json:
        click.echo(json.dumps(s, indent=2))
        return
    click.echo(f"{s['name']}: {s['num_nodes']:,} nodes, {s['num_edges']:,} edges")
    for t, n in s["node_types"].items():
        click.echo(f"  node type {t:<12} {n:>14,}")
    for e, m in s["edge_types"].items():
        click.echo(f"  edge type {e:<36} {m:>14,}")
    lab = s["labels"]
    click.echo(f"  labels on {lab['node_type']}: {lab['num_classes']} classes, {lab['num_labeled']:,} labelled; "
               f"splits " + ", ".join(f"{k} {v:,}" for k, v in s["splits"].items()))
    for t, d in s["degree"].items():
        if d.get("nodes"):
            click.echo(f"  degree {t}: min {d['min']} / max {d['max']:,} / mean {d['mean']:.2f} / median "
                       f"{d['median']:.0f} / p99 {d['p99']:.0f}; degree-1 nodes {d['degree_1']:,}, "
                       f"isolated {d['isolated']:,}")
    if s.get("homophily") is not None:
        click.echo(f"  homophily (same-class edges): {s['homophily']:.3f}")
    for f in s["features"]:
        click.echo(f"  features {f['node_type']}: {f['rows']:,} x {f['dim']} {f['dtype']} "
                   f"({f['row_bytes']} B/row, stride {f['row_stride']}) = {f['bytes'] / 2**30:.3f} GiB")
    b = s["bytes"]
    click.echo(f"  on disk: {b['total'] / 2**30:.3f} GiB (features {b['features'] / 2**30:.3f}, "
               f"topology {b['topology'] / 2**30:.3f}, other {b['other'] / 2**20:.1f} MiB)")


def _real():
    try:
        from lsm_gnn.datasets import real
    except ImportError as e:  # the real-dataset package is optional at this stage
        raise click.ClickException(f"real-dataset support is not available: {e}") from None
    return real


@dataset.command()
@click.argument("name", type=click.Choice(list(REAL_DATASETS)))
@click.option("--size", default=None, help="Size for igb/igbh: tiny, small, medium, large or full.")
@click.option("--dest", type=click.Path(file_okay=False), default=None,
              callback=output_option("into", "download folder"),
              help="Download directory [default: data/raw/NAME].")
@click.option("--base-url", default=None, help="Mirror to download from instead of the official host.")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
def download(name, size, dest, base_url, no_progress):
    """Download a real dataset (resumable; sizes or checksums checked). NAME: see `dataset list`."""
    _check_size(name, size)
    dest = dest or f"data/raw/{name}"
    result = _real().download(name, size, dest, base_url=base_url, progress=not no_progress)
    click.echo(f"downloaded {name}{' ' + size if size else ''} to {result or dest}")


@dataset.command()
@click.argument("name", type=click.Choice(list(REAL_DATASETS)))
@click.argument("raw_dir", type=click.Path(exists=True, file_okay=False))
@click.argument("out_dir", type=click.Path(file_okay=False))
@click.option("--size", default=None, help="Size for igb/igbh (detected from RAW_DIR when omitted).")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
def prepare(name, raw_dir, out_dir, size, no_progress):
    """Convert a downloaded dataset in RAW_DIR into the lsm-gnn format at OUT_DIR."""
    _check_size(name, size)
    result = _real().prepare(name, raw_dir, out_dir, size=size, progress=not no_progress)
    click.echo(f"prepared {name} at {getattr(result, 'root', None) or out_dir}")


def _check_size(name: str, size: str | None):
    sizes = REAL_DATASETS[name][0]
    if size is not None and size not in sizes:
        expected = ", ".join(sizes) if sizes else "no --size (this dataset has one size)"
        raise click.BadParameter(f"{size!r} for {name}; expected {expected}", param_hint="--size")
