"""Per-owner feature files: owner o's file holds the rows v with v % G == o at position v // G.

This is the layout LSM-GNN gives each GPU's own SSDs (Park et al., arXiv 2407.15264; in the authors'
code, jeongminpark417/COALA-GNN, each GPU drives its own SSDs and owns v % G): an owner reads
from storage only the rows it owns, from a file of its own. The files keep the row stride and the
4 KiB block padding of `features.bin`, so every reader (O_DIRECT included) opens them as they are.
They are derived data, cached next to the dataset under `<dataset>/owners-G/` (or under a
directory the caller names), each written atomically, with a manifest that ties them to the
`features.bin` checksum so a changed dataset is never served from stale owner files.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from lsm_gnn.datasets.checksums import check_rows
from lsm_gnn.datasets.format import BLOCK, Dataset, FeatureLayout
from lsm_gnn.ownership import global_row, owned_count, owner_slice
from lsm_gnn.utils.atomic import atomic_path
from lsm_gnn.utils.errors import DataError, InputError

MANIFEST = "manifest.json"
CHUNK_BYTES = 64 << 20


def owner_num_rows(num_rows: int, num_owners: int, owner: int) -> int:
    """How many of the rows 0..num_rows-1 owner `owner` holds (len(range(owner, num_rows, G)))."""
    return owned_count(num_rows, num_owners, owner)


def owner_dir(dataset: Dataset, num_owners: int, out_dir: str | os.PathLike | None = None) -> Path:
    base = Path(out_dir) if out_dir is not None else dataset.root
    return base / f"owners-{num_owners}"


def owner_dirs(dataset: Dataset, num_owners: int, out_dir: str | os.PathLike | None = None,
               rank_dirs: list | None = None) -> list[Path]:
    """The folder of each owner's file: `rank_dirs[o]/owners-G` where every rank has a storage
    folder of its own (`storage.rank_dirs`, one per owner), else the one `owner_dir` for all."""
    if rank_dirs is None:
        return [owner_dir(dataset, num_owners, out_dir)] * num_owners
    if len(rank_dirs) != num_owners:
        raise InputError(f"storage.rank_dirs names {len(rank_dirs)} folder(s); expected one per device "
                         f"({num_owners}): {list(rank_dirs)}")
    return [Path(d) / f"owners-{num_owners}" for d in rank_dirs]


def replica_layout(dataset: Dataset, rank_dirs: list, rank: int, world: int, progress: bool = False) -> FeatureLayout:
    """Rank `rank`'s full copy of features.bin in its own storage folder (`rank_dirs[rank]`): the
    one-owner file of that folder (`owners-1/owner-0.bin`, written on first use, every row checked
    against its checksum), which holds every row at its own position, as features.bin does."""
    if len(rank_dirs) != world:
        raise InputError(f"storage.rank_dirs names {len(rank_dirs)} folder(s); expected one per device "
                         f"({world}): {list(rank_dirs)}")
    return ensure_owner_files(dataset, 1, out_dir=rank_dirs[rank], progress=progress)[0]


def owner_layout(layout: FeatureLayout, path: Path, num_owners: int, owner: int) -> FeatureLayout:
    n = owner_num_rows(layout.num_rows, num_owners, owner)
    data = n * layout.row_stride
    # an owner file holds features.bin's rows owner, owner + G, ...: their checksums are a view
    sums = None if layout.checksums is None else layout.checksums[owner_slice(owner, num_owners)]
    return dataclasses.replace(layout, path=path, num_rows=n, file_bytes=data + (-data) % BLOCK,
                               type_offsets={}, checksums=sums)


def _source_id(dataset: Dataset) -> dict:
    lay = dataset.features()
    entry = dataset.meta.get("files", {}).get(lay.path.name, {})
    return {"features_sha256": entry.get("sha256"), "features_bytes": lay.file_bytes,
            "num_rows": lay.num_rows, "row_stride": lay.row_stride, "dtype": lay.dtype.name}


def _is_current(directory: Path, expected: dict, layouts: list[FeatureLayout]) -> bool:
    try:
        manifest = json.loads((directory / MANIFEST).read_text())
    except (OSError, json.JSONDecodeError):
        return False
    if manifest.get("source") != expected:
        return False
    return all(lay.path.is_file() and lay.path.stat().st_size == lay.file_bytes for lay in layouts)


def _write_owner_file(src_rows: np.ndarray, lay: FeatureLayout, num_owners: int, owner: int, bar,
                      src: FeatureLayout | None = None) -> None:
    """Copy owner `owner`'s rows; each row is checked against features.bin's checksums on the way
    (`src.checksums`), so a corrupt row is never copied into a file that then looks sound."""
    stride = lay.row_stride
    rows_per_chunk = max(1, CHUNK_BYTES // stride)
    with atomic_path(lay.path) as tmp:
        with open(tmp, "wb") as f:
            for start in range(0, lay.num_rows, rows_per_chunk):
                stop = min(lay.num_rows, start + rows_per_chunk)
                # local rows start..stop-1 are global rows owner + G*start .. (step G)
                block = src_rows[owner_slice(owner, num_owners, start, stop)]
                if src is not None and src.checksums is not None:
                    rows = global_row(np.arange(start, stop), owner, num_owners)
                    check_rows(src.path, block, rows, src.checksums, src.row_bytes)
                f.write(np.ascontiguousarray(block).data)
                if bar is not None:
                    bar.update(len(block))
            pad = lay.file_bytes - lay.num_rows * stride
            if pad:
                f.write(b"\0" * pad)


def ensure_owner_files(dataset: Dataset | str | os.PathLike, num_owners: int, *,
                       out_dir: str | os.PathLike | None = None, owners: list[int] | None = None,
                       progress: bool = True, rank_dirs: list | None = None) -> list[FeatureLayout]:
    """Layouts of the G owner files, writing any that are missing or stale.

    `owners` limits which files this call writes (a rank writes only its own); the returned list
    always has all G layouts. `rank_dirs` (one folder per owner, `storage.rank_dirs`) puts owner
    o's file, and a manifest of its own, under `rank_dirs[o]/owners-G/` instead of `out_dir`.
    """
    if not isinstance(dataset, Dataset):
        dataset = Dataset(dataset)
    if num_owners < 1:
        raise InputError(f"num_owners must be >= 1, found {num_owners}")
    lay = dataset.features()
    dirs = owner_dirs(dataset, num_owners, out_dir, rank_dirs)
    layouts = [owner_layout(lay, dirs[o] / f"owner-{o}.bin", num_owners, o) for o in range(num_owners)]
    wanted = list(range(num_owners) if owners is None else owners)
    for directory in dict.fromkeys(dirs[o] for o in wanted):  # each folder once, in owner order
        _ensure_in(dataset, lay, directory, num_owners, [o for o in wanted if dirs[o] == directory],
                   [la for o, la in enumerate(layouts) if dirs[o] == directory], layouts, progress)
    return layouts


def _ensure_in(dataset: Dataset, lay: FeatureLayout, directory: Path, num_owners: int, wanted: list[int],
               listed: list[FeatureLayout], layouts: list[FeatureLayout], progress: bool) -> None:
    """Write the `wanted` owners' files of one folder where missing or stale, then its manifest
    (which lists the files of that folder, `listed`)."""
    expected = _source_id(dataset)
    if _is_current(directory, expected, [layouts[o] for o in wanted]):
        return
    if not lay.path.is_file() or lay.path.stat().st_size < lay.num_rows * lay.row_stride:
        raise DataError(lay.path, "feature file missing or shorter than metadata.json says",
                        expected=lay.num_rows * lay.row_stride,
                        found=lay.path.stat().st_size if lay.path.exists() else None)
    from lsm_gnn.utils.outpaths import check_output

    for out in [directory / MANIFEST] + [layouts[o].path for o in wanted]:  # before any work
        check_output(out, "file", "owner file")
    directory.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    raw = np.memmap(lay.path, dtype=np.uint8, mode="r", shape=(lay.num_rows * lay.row_stride,))
    src_rows = raw.reshape(lay.num_rows, lay.row_stride)
    bar = None
    if progress and sys.stderr.isatty():
        from tqdm import tqdm

        bar = tqdm(total=sum(layouts[o].num_rows for o in wanted), unit="row",
                   desc=f"owner files (G={num_owners})")
    try:
        for o in wanted:
            _write_owner_file(src_rows, layouts[o], num_owners, o, bar, lay)
    finally:
        if bar is not None:
            bar.close()
    # the build time is kept so that a run reusing the files is charged it like a fresh one (as
    # Dist-DGL's reused partitions report their METIS time)
    with atomic_path(directory / MANIFEST) as tmp:
        tmp.write_text(json.dumps({"source": expected, "num_owners": num_owners,
                                   "files": [la.path.name for la in listed],
                                   "build_s": time.perf_counter() - t0}, indent=2) + "\n")


def owner_files_build_seconds(dataset: Dataset, num_owners: int, out_dir: str | os.PathLike | None = None,
                              rank_dirs: list | None = None) -> float | None:
    """Seconds the current owner files took to write, every folder's together (None if unknown)."""
    total = 0.0
    for directory in dict.fromkeys(owner_dirs(dataset, num_owners, out_dir, rank_dirs)):
        try:
            value = json.loads((directory / MANIFEST).read_text()).get("build_s")
        except (OSError, ValueError):
            return None
        if not isinstance(value, (int, float)):
            return None
        total += float(value)
    return total


def read_owner_rows(layout: FeatureLayout, local_rows: np.ndarray) -> np.ndarray:
    """Rows of an owner file by local position (tests and checks; the hot path uses a FeatureStore)."""
    return np.asarray(layout.view("r")[local_rows])
