"""`lsm-gnn bench ...`: every benchmark prints ratios against a baseline measured in the same
run, and with --json one JSON object with the same figures under stable names."""

import click

from lsm_gnn.cli.group import LazyGroup

BENCHES = ("storage", "cache", "train", "multidevice", "exchange", "compare", "validate", "device", "loader",
           "checksums", "inplace")


def benchmark(name: str) -> click.Command:
    """The benchmark `name`, imported on first use; each is one module of lsm_gnn/bench/."""
    if name == "storage":
        from lsm_gnn.bench.storage import bench_storage as cmd
    elif name == "cache":
        from lsm_gnn.bench.cache import bench_cache as cmd
    elif name == "train":
        from lsm_gnn.bench.train import bench_train as cmd
    elif name == "multidevice":
        from lsm_gnn.bench.multidevice import bench_multidevice as cmd
    elif name == "exchange":
        from lsm_gnn.bench.exchange import bench_exchange as cmd
    elif name == "compare":
        from lsm_gnn.bench.compare import bench_compare as cmd
    elif name == "validate":
        from lsm_gnn.bench.validate import bench_validate as cmd
    elif name == "device":
        from lsm_gnn.bench.device import bench_device as cmd
    elif name == "loader":
        from lsm_gnn.bench.loader import bench_loader as cmd
    elif name == "checksums":
        from lsm_gnn.bench.checksums import bench_checksums as cmd
    elif name == "inplace":
        from lsm_gnn.bench.inplace import bench_inplace as cmd
    else:
        raise KeyError(name)
    return cmd


@click.group(cls=LazyGroup, names=BENCHES, load=benchmark)
def bench():
    """Benchmarks with ratios against a baseline measured in the same run."""
