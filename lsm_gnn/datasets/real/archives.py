"""Resumable, safe extraction of the downloaded archives (IGB .tar.gz, OGB .zip).

Members are extracted one by one through a temporary name; a member whose file already exists
with the member's size is skipped, so an interrupted extraction continues where it stopped
(a gzip stream still has to be decompressed up to that point; a zip member is seeked to).
Paths are checked (no absolute paths, no `..`, no links out of the destination): tar members go
through `tarfile.data_filter`; links and special files are skipped.
"""

from __future__ import annotations

import os
import shutil
import sys
import tarfile
import zipfile
import zlib
from pathlib import Path, PurePosixPath

from tqdm import tqdm

from lsm_gnn.utils.errors import DataError

COPY_CHUNK = 1 << 22


def _show(progress: bool) -> bool:
    return bool(progress) and sys.stderr.isatty()


def _safe_target(dest: Path, name: str, archive: Path) -> Path:
    p = PurePosixPath(name)
    if p.is_absolute() or ".." in p.parts:
        raise DataError(archive, f"member {name!r} would be written outside {dest}")
    return dest.joinpath(*p.parts)


def _copy(src, target: Path, bar):
    tmp = target.with_name(f".{target.name}.partial")
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        with open(tmp, "wb") as out:
            while chunk := src.read(COPY_CHUNK):
                out.write(chunk)
                bar.update(len(chunk))
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()


def extract(archive: str | os.PathLike, dest: str | os.PathLike, kind: str, progress: bool = True) -> list[str]:
    """Extract `archive` ("tar.gz" or "zip") into `dest`; returns the top-level entry names."""
    archive, dest = Path(archive), Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    if kind == "tar.gz":
        return _extract_tar(archive, dest, progress)
    if kind == "zip":
        return _extract_zip(archive, dest, progress)
    raise ValueError(f"unknown archive kind {kind!r}")


def _extract_tar(archive: Path, dest: Path, progress: bool) -> list[str]:
    tops = set()
    bar = tqdm(total=archive.stat().st_size, unit="B", unit_scale=True, unit_divisor=1024,
               desc=f"extract {archive.name}", disable=not _show(progress), leave=False)
    try:
        with open(archive, "rb") as raw, tarfile.open(fileobj=raw, mode="r:gz") as tf:
            for m in tf:
                try:
                    m = tarfile.data_filter(m, os.fspath(dest))
                except tarfile.FilterError as e:
                    raise DataError(archive, f"unsafe member {m.name!r}: {e}") from None
                target = _safe_target(dest, m.name, archive)
                tops.add(PurePosixPath(m.name).parts[0])
                if m.isdir():
                    target.mkdir(parents=True, exist_ok=True)
                elif m.isfile():
                    if target.is_file() and target.stat().st_size == m.size:
                        continue
                    with tf.extractfile(m) as src:
                        _copy(src, target, _NoBar())
                bar.update(raw.tell() - bar.n)
    except (tarfile.TarError, EOFError, zlib.error, OSError) as e:
        if isinstance(e, (FileNotFoundError, PermissionError)):
            raise
        raise DataError(archive, f"corrupt or truncated tar.gz archive: {e}") from None
    finally:
        bar.close()
    return sorted(tops)


def _extract_zip(archive: Path, dest: Path, progress: bool) -> list[str]:
    tops = set()
    try:
        with zipfile.ZipFile(archive) as zf:
            infos = zf.infolist()
            bar = tqdm(total=sum(i.file_size for i in infos), unit="B", unit_scale=True, unit_divisor=1024,
                       desc=f"extract {archive.name}", disable=not _show(progress), leave=False)
            try:
                for info in infos:
                    target = _safe_target(dest, info.filename, archive)
                    tops.add(PurePosixPath(info.filename).parts[0])
                    if info.is_dir():
                        target.mkdir(parents=True, exist_ok=True)
                        continue
                    if target.is_file() and target.stat().st_size == info.file_size:
                        bar.update(info.file_size)
                        continue
                    with zf.open(info) as src:
                        _copy(src, target, bar)
            finally:
                bar.close()
    except (zipfile.BadZipFile, zlib.error, EOFError) as e:
        raise DataError(archive, f"corrupt or truncated zip archive: {e}") from None
    return sorted(tops)


class _NoBar:
    def update(self, n):
        pass


def remove(archive: Path):
    """Delete an archive after a complete extraction (it can be tens of GB)."""
    if archive.is_dir():
        shutil.rmtree(archive)
    elif archive.exists():
        archive.unlink()
