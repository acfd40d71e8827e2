"""Real datasets: download (resumable, verified, never prompting) and preparation into the
lsm-gnn format (chunked, resumable, committed atomically). User guide: docs/real-datasets.md.

    download(name, size, dest, base_url=None, progress=True) -> Path   # the raw directory
    prepare(name, raw_dir, out_dir, size=None, progress=True, overwrite=False) -> Dataset

Names: "igb", "igbh" (sizes tiny, small, medium, large, full), "ogbn-papers100M", "mag240m"
(single size: None). Nothing here imports the `ogb` package.
"""

from __future__ import annotations

import json
import logging
import os
from datetime import datetime, timezone
from pathlib import Path

from lsm_gnn.datasets.format import Dataset
from lsm_gnn.datasets.real import archives, catalog
from lsm_gnn.datasets.real.http import fetch
from lsm_gnn.datasets.real.npy import check_rows, open_array
from lsm_gnn.utils.atomic import write_json
from lsm_gnn.utils.errors import DataError, DownloadError, InputError

__all__ = ["download", "prepare", "NAMES", "IGB_SIZES"]

NAMES = catalog.NAMES
IGB_SIZES = catalog.IGB_SIZES
MARKER = ".lsm-gnn-download.json"
log = logging.getLogger(__name__)


def _verify_array(path: Path, spec: catalog.ArraySpec):
    arr = open_array(path, dtype=spec.dtype, row_shape=spec.row_shape if spec.raw_possible else None)
    if arr.dtype != spec.dtype and not (spec.dtype == "int64" and arr.dtype.kind in "iu"):
        raise DataError(path, "unexpected dtype", expected=spec.dtype, found=arr.dtype)
    if spec.row_shape == (2,):      # edges: (E, 2) or (2, E)
        if arr.ndim != 2 or 2 not in arr.shape:
            raise DataError(path, "edge array must be (E, 2) or (2, E)", found=arr.shape)
        return
    if tuple(arr.shape[1:]) != tuple(spec.row_shape) and not (spec.row_shape == () and arr.shape[1:] == (1,)):
        raise DataError(path, "unexpected row shape", expected=spec.row_shape, found=arr.shape[1:])
    check_rows(arr, path, rows=spec.rows, max_rows=spec.max_rows)


def download(name: str, size: str | None, dest: str | os.PathLike, base_url: str | None = None,
             progress: bool = True) -> Path:
    """Fetch one dataset into `dest` and return its raw directory (input of `prepare`).

    IGB/IGBH tiny..medium: the tarball (MD5-checked, extracted to `dest/<size>/processed`, then
    deleted). IGB/IGBH large/full: every array file to `dest/<size>/processed/...`, checked by byte
    size (headerless files) or by its .npy header. papers100M and MAG240M: the zip (MAG240M
    MD5-checked), extracted into `dest`, then deleted. Downloads resume after interruption
    (rerun the same call); a finished download is recorded in `<raw dir>/.lsm-gnn-download.json`
    and not repeated. `base_url` replaces the catalog's directory URL (a mirror with the same
    relative paths).
    """
    rel = catalog.release(name, size)
    base = (base_url or rel.base_url).rstrip("/")
    dest = Path(dest)
    root = dest / rel.root
    marker = root / MARKER
    if marker.is_file():
        info = json.loads(marker.read_text())
        if info.get("name") == rel.name and info.get("size") == rel.size:
            return root
        raise InputError(f"{root} already holds {info.get('name')} {info.get('size') or ''}; "
                         f"download {name} {size or ''} into another directory")
    dest.mkdir(parents=True, exist_ok=True)
    records, archives_done = [], []
    for f in rel.files:
        url = f"{base}/{f.path}"
        target = dest / f.dest
        fetch(url, target, md5=f.md5, size=f.size, progress=progress)
        if f.array is not None:
            try:
                _verify_array(target, f.array)
            except DataError as e:
                bad = target.with_name(target.name + ".bad")
                os.replace(target, bad)
                raise DownloadError(f"{url}: the downloaded file is not what the catalog describes: {e}; "
                                    f"moved to {bad}") from None
        records.append({"path": f.dest, "url": url, "bytes": target.stat().st_size, "md5": f.md5})
        if f.archive is not None:
            tops = archives.extract(target, dest, f.archive, progress)
            if not root.is_dir():
                raise DataError(target, f"archive did not create {rel.root}/", found=f"top-level entries {tops}")
            archives_done.append(target)
    write_json(marker, {"name": rel.name, "size": rel.size, "base_url": base, "files": records,
                        "completed": datetime.now(timezone.utc).isoformat(timespec="seconds")})
    for a in archives_done:
        archives.remove(a)
    return root


def prepare(name: str, raw_dir: str | os.PathLike, out_dir: str | os.PathLike, size: str | None = None,
            progress: bool = True, overwrite: bool = False) -> Dataset:
    """Convert a downloaded dataset in `raw_dir` into the lsm-gnn format at `out_dir`.

    Works in chunks (memory bounded by chunk sizes and O(nodes) arrays, see docs/real-datasets.md)
    and resumes after an interruption from `<out_dir>.prepare-state/`; `out_dir` appears only
    when complete. `size` (IGB/IGBH) is read from the download marker or directory name if omitted.
    """
    from lsm_gnn.datasets.real.build import prepare_graph

    if name not in NAMES:
        raise InputError(f"unknown dataset {name!r}; expected one of {', '.join(NAMES)}")
    raw_dir = Path(raw_dir)
    if not raw_dir.is_dir():
        raise DataError(raw_dir, "raw dataset directory does not exist (run download first)")
    if name in ("igb", "igbh"):
        from lsm_gnn.datasets.real import igb

        if size is not None:
            catalog.check_name_size(name, size)
        inputs, read, extra = igb.plan(name, raw_dir, size)
    elif name == "ogbn-papers100M":
        from lsm_gnn.datasets.real import ogb

        catalog.check_name_size(name, size)
        inputs, read = ogb.plan(raw_dir, progress)
        extra = {}
    else:
        from lsm_gnn.datasets.real import mag

        catalog.check_name_size(name, size)
        inputs, read = mag.plan(raw_dir)
        extra = {}
    return prepare_graph(name, out_dir, inputs, read, progress=progress, overwrite=overwrite,
                         fingerprint_extra=extra)
