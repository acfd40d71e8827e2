"""Partition an lsm-gnn dataset for Dist-DGL, one partition per machine, and time it.

The time is part of the comparison (the paper's argument includes the cost of partitioning), so
loading the dataset into a DGLGraph and `dgl.distributed.partition_graph` are timed apart and
written next to the partitions (`lsm_partition.json`), so a cached partitioning still reports the
time it cost when it was made.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from lsm_gnn.datasets.format import Dataset
from lsm_gnn.utils.atomic import atomic_dir
from lsm_gnn.utils.errors import InputError

METHODS = ("metis", "random")
META_FILE = "lsm_partition.json"
BALANCE = "train_mask"
"""What METIS balances across partitions beside the edges: the training nodes (a partitioning made
without it is not reused)."""


@dataclass
class PartitionInfo:
    part_config: str          # path of DGL's <graph_name>.json
    graph_name: str
    num_parts: int
    method: str
    load_s: float             # dataset -> in-memory DGLGraph with features, labels and masks
    partition_s: float        # dgl.distributed.partition_graph (assignment + halo + files)
    num_nodes: int
    num_edges: int
    feature_bytes_read: int   # bytes of features.bin read while loading (rows x row bytes)
    reused: bool = False      # True when an existing partitioning was reused (times are from then)
    balanced_on: str | None = None  # the node types METIS balanced across partitions (None: nodes only)

    @property
    def preprocessing_s(self) -> float:
        return self.load_s + self.partition_s

    def as_dict(self) -> dict:
        d = asdict(self)
        d["preprocessing_s"] = self.preprocessing_s
        return d


def dataset_to_dgl(dataset: Dataset):
    """The homogeneous dataset as a DGLGraph with ndata feat, label and train/val/test masks."""
    import dgl
    import torch

    if not dataset.is_homogeneous:
        raise InputError(f"{dataset.root}: the Dist-DGL baseline supports homogeneous datasets only "
                         f"(found node types {dataset.node_types}, edge types {dataset.edge_types})")
    etype = dataset.edge_types[0]
    indptr, indices = dataset.csc(etype)
    n = dataset.num_nodes()
    # CSC = in-edges per destination, which is what both samplers draw neighbours from.
    dst = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    g = dgl.graph((torch.from_numpy(np.array(indices, dtype=np.int64)), torch.from_numpy(dst)), num_nodes=n)
    feats = dataset.features().load_rows()  # every row checked against its checksum
    g.ndata["feat"] = torch.from_numpy(feats)
    g.ndata["label"] = torch.from_numpy(np.array(dataset.labels(), dtype=np.int64))  # a copy: the file is mapped read-only
    for split in ("train", "val", "test"):
        mask = torch.zeros(n, dtype=torch.bool)
        mask[torch.from_numpy(np.array(dataset.split(split), dtype=np.int64))] = True  # a copy, as above
        g.ndata[f"{split}_mask"] = mask
    return g


def partition_dataset(dataset: Dataset | str | os.PathLike, out_dir: str | os.PathLike, num_parts: int,
                      method: str = "metis", graph_name: str = "lsmgraph", reuse: bool = False,
                      num_trainers_per_machine: int = 1) -> PartitionInfo:
    """Partition into `out_dir` (built atomically); with `reuse`, keep a matching earlier result."""
    import dgl

    if method not in METHODS:
        raise InputError(f"partition method must be one of {METHODS}, not {method!r}")
    if num_parts < 1:
        raise InputError(f"num_parts must be >= 1, not {num_parts}")
    ds = dataset if isinstance(dataset, Dataset) else Dataset(dataset)
    out_dir = Path(out_dir)
    meta_path = out_dir / META_FILE
    if reuse and meta_path.is_file():
        info = PartitionInfo(**{k: v for k, v in json.loads(meta_path.read_text()).items()
                                if k in PartitionInfo.__dataclass_fields__})
        # the config beside the meta file, as an absolute path (the machines run elsewhere)
        info.part_config = str((out_dir / Path(info.part_config).name).resolve())
        if (info.num_parts == num_parts and info.method == method and info.graph_name == graph_name
                and info.balanced_on == BALANCE and Path(info.part_config).is_file()):
            info.reused = True
            return info

    t0 = time.perf_counter()
    g = dataset_to_dgl(ds)
    load_s = time.perf_counter() - t0
    lay = ds.features()
    with atomic_dir(out_dir) as tmp:
        t0 = time.perf_counter()
        # DGL prints its progress to stdout: keep stdout for our own output (`--json`)
        with contextlib.redirect_stdout(sys.stderr):
            # balanced on the training mask as DGL's distributed guide advises for node classification
            # (https://www.dgl.ai/dgl_docs/guide/distributed-preprocessing.html, "load balancing":
            # balance_ntypes=g.ndata['train_mask'], so every trainer gets as many training nodes), and on edges
            dgl.distributed.partition_graph(g, graph_name, num_parts, str(tmp), part_method=method,
                                            balance_ntypes=g.ndata["train_mask"], balance_edges=True,
                                            num_trainers_per_machine=num_trainers_per_machine)
        partition_s = time.perf_counter() - t0
        info = PartitionInfo(part_config=str(out_dir.resolve() / f"{graph_name}.json"), graph_name=graph_name,
                             num_parts=num_parts, method=method, load_s=load_s, partition_s=partition_s,
                             num_nodes=g.num_nodes(), num_edges=g.num_edges(),
                             feature_bytes_read=lay.num_rows * lay.row_bytes, balanced_on=BALANCE)
        (tmp / META_FILE).write_text(json.dumps(info.as_dict(), indent=2) + "\n")
    return info


def remove_partitions(out_dir: str | os.PathLike) -> None:
    shutil.rmtree(out_dir, ignore_errors=True)
