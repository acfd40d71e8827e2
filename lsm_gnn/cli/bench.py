"""`lsm-gnn bench ...`: every benchmark prints ratios against a baseline measured in the same
run, and with --json one JSON object with the same figures under stable names."""

from lsm_gnn.cli import LazyGroup

import click

BENCHES = {
    "storage": "lsm_gnn.bench.storage:bench_storage",
    "cache": "lsm_gnn.bench.cache:bench_cache",
    "train": "lsm_gnn.bench.train:bench_train",
    "multidevice": "lsm_gnn.bench.multidevice:bench_multidevice",
    "exchange": "lsm_gnn.bench.exchange:bench_exchange",
    "compare": "lsm_gnn.bench.compare:bench_compare",
    "validate": "lsm_gnn.bench.validate:bench_validate",
    "device": "lsm_gnn.bench.device:bench_device",
    "loader": "lsm_gnn.bench.loader:bench_loader",
}


@click.group(cls=LazyGroup, lazy=BENCHES)
def bench():
    """Benchmarks with ratios against a baseline measured in the same run."""
