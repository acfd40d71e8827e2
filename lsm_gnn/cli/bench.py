"""`lsm-gnn bench ...`: every benchmark prints ratios against a baseline measured in the same
run, and with --json one JSON object with the same figures under stable names."""

from lsm_gnn.cli import LazyGroup

import click

BENCHES = {
    "storage": "lsm_gnn.storage.bench:bench_storage",
    "cache": "lsm_gnn.cache.bench:bench_cache",
    "train": "lsm_gnn.train.bench:bench_train",
    "multidevice": "lsm_gnn.multidevice.bench:bench_multidevice",
    "exchange": "lsm_gnn.multidevice.linkbench:bench_exchange",
    "compare": "baselines.bench:bench_compare",
    "validate": "baselines.bench:bench_validate",
    "device": "lsm_gnn.storage.emulated_bench:bench_device",
    "loader": "lsm_gnn.integrations.bench:bench_loader",
}


@click.group(cls=LazyGroup, lazy=BENCHES)
def bench():
    """Benchmarks with ratios against a baseline measured in the same run."""
