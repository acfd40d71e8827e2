"""`open_feature_store`: one entry point for every reader, over a dataset, its layout or a dataset path.

    store = open_feature_store("data/synthetic-tiny", "direct", threads=64)
    rows = store.read_rows(ids)            # (len(ids), dim), any order, duplicates allowed
    store.path_info                        # which path ran: reader, backend, queue depth, ...
    store.counters                         # rows, distinct rows, I/O ops, bytes read, seconds

Per-owner files (multi-device): open the owner's file through a `FeatureLayout` with its own path
and row count, and pass `row_map=owner_row_map(owner, num_owners)` so that global id v is read
from local row v // num_owners (ids not owned by `owner` are an InputError).
"""

from __future__ import annotations

import os
from pathlib import Path


from lsm_gnn.choices import READERS  # noqa: F401 (re-exported: the one list of storage.reader's values)
from lsm_gnn.datasets.format import Dataset, FeatureLayout
from lsm_gnn.ownership import owner_row_map  # noqa: F401 (re-exported: its old path)
from lsm_gnn.storage.base import FeatureStore
from lsm_gnn.utils.errors import InputError

_BLOCK_OPTS = {"backend", "threads", "queue_depth", "block_size", "max_io_bytes"}


def _layout(source) -> FeatureLayout:
    if isinstance(source, FeatureLayout):
        return source
    if isinstance(source, Dataset):
        return source.features()
    if isinstance(source, (str, os.PathLike)):
        return Dataset(Path(source)).features()
    raise InputError(f"expected a Dataset, FeatureLayout or dataset directory, found {type(source).__name__}")


def open_feature_store(source, reader: str = "direct", *, row_map=None, drop_page_cache: bool = False,
                       verify_checksums: bool = True, **opts) -> FeatureStore:
    """Open a feature store; `opts` go to the reader (see docs/storage.md for each reader's options).

    direct / buffered (accepted and ignored by mmap and memory): backend ("auto", "aio", "threads", "io_uring"), threads, queue_depth, block_size,
    max_io_bytes. mmap: advice ("normal", or "random" to turn readahead off). gpu: host_reader (default "direct"), transfer ("auto", "pinned", "kvikio"),
    device, plus the host reader's options. drop_page_cache evicts the file's pages first.
    verify_checksums: every row read is checked against the layout's row checksums (where it has
    them; docs/storage.md, "Row checksums": measured at a few % of the random-read rate); the
    memory reader checks every row once while it loads the file.
    """
    store = _open(source, reader, row_map, drop_page_cache, verify_checksums, opts)
    if _layout(source).checksums is None:  # an older dataset (`dataset verify --write-checksums`)
        store.checksum_state = "absent"
    return store


def _open(source, reader, row_map, drop_page_cache, verify_checksums, opts) -> FeatureStore:
    if reader not in READERS:
        raise InputError(f"reader must be one of {', '.join(READERS)}, found {reader!r}")
    lay = _layout(source)
    if drop_page_cache and reader != "memory":
        from lsm_gnn.storage.pagecache import drop_file_cache

        drop_file_cache(lay.path)
    args = (lay.path, lay.num_rows, lay.dim, lay.dtype, lay.row_stride, lay.file_bytes)
    sums = lay.checksums if verify_checksums else None
    if reader == "gpu":
        return _open_gpu(lay, args, row_map, opts, sums)
    advice = opts.pop("advice", "normal") if reader == "mmap" else "normal"
    unknown = set(opts) - _BLOCK_OPTS
    if unknown:
        raise InputError(f"unknown option(s) {', '.join(sorted(unknown))} for reader {reader!r}; "
                         f"the block readers take {', '.join(sorted(_BLOCK_OPTS))}")
    # mmap and memory accept the block readers' options and ignore them, so one StorageConfig
    # opens any reader
    if reader == "direct":
        from lsm_gnn.storage.direct import DirectStore

        return DirectStore(*args, row_map=row_map, **opts).verify_with(sums)
    if reader == "buffered":
        from lsm_gnn.storage.buffered import BufferedStore

        return BufferedStore(*args, row_map=row_map, **opts).verify_with(sums)
    if reader == "mmap":
        from lsm_gnn.storage.mmap_store import MmapStore

        return MmapStore(*args, row_map=row_map, advice=advice).verify_with(sums)
    from lsm_gnn.storage.memory import MemoryStore

    return MemoryStore.load(lay, row_map=row_map, row_checksums=sums)


def _open_gpu(lay, args, row_map, opts, sums) -> FeatureStore:
    from lsm_gnn.storage import gpu

    opts = dict(opts)
    host_reader = opts.pop("host_reader", "direct")
    transfer = opts.pop("transfer", "auto")
    device = opts.pop("device", "cuda")
    if transfer not in ("auto", "pinned", "kvikio"):
        raise InputError(f"transfer must be auto, pinned or kvikio, found {transfer!r}")
    if not gpu.cuda_available():
        raise InputError("reader 'gpu' needs a CUDA device; torch.cuda.is_available() is False here")
    if transfer in ("auto", "kvikio"):
        ok, why = gpu.kvikio_status(lay.path)
        if ok:
            kv = {k: opts[k] for k in ("block_size", "max_io_bytes") if k in opts}
            store = gpu.KvikioStore(*args, row_map=row_map, **kv)
            # kvikio reads straight to the device: no host copy to verify (`lsm-gnn dataset verify` does)
            store.checksum_state = "not verified (kvikio reads to the device)" if sums is not None else "off"
            return store
        if transfer == "kvikio":
            raise InputError(f"kvikio transfer unavailable: {why}")
    host = open_feature_store(lay, host_reader, row_map=row_map, verify_checksums=sums is not None, **opts)
    store = gpu.PinnedDeviceStore(host, device=device)
    store.checksum_state = host.checksum_state  # the host reader verifies
    return store


def open_from_config(source, cfg, *, row_map=None, time_scale: float = 1.0) -> FeatureStore:
    """Open the reader a `StorageConfig` describes (every run's store: lsm_gnn.sources.factory).
    The block readers' options go to every reader (mmap and memory ignore them, the gpu reader
    hands them to its host reader); mmap also takes its advice. With `device: emulated` the direct
    and buffered readers are the emulated device (lsm_gnn.storage.emulated) at `time_scale`
    (emulation.time_scale); mmap stays real and its path says so."""
    if cfg.device == "emulated" and cfg.reader in ("direct", "buffered"):
        from lsm_gnn.storage.emulated import open_emulated

        return open_emulated(_layout(source), cfg, time_scale=time_scale, row_map=row_map,
                             verify_checksums=cfg.verify_checksums)
    if cfg.device == "emulated" and cfg.reader == "gpu":
        raise InputError("storage.device: emulated serves the direct and buffered readers, not storage.reader 'gpu'")
    opts = {"backend": cfg.backend, "threads": cfg.threads, "queue_depth": cfg.queue_depth,
            "block_size": cfg.block_size, "max_io_bytes": cfg.max_io_bytes,
            "verify_checksums": cfg.verify_checksums}
    if cfg.reader == "mmap":
        opts["advice"] = cfg.mmap_advice
    store = open_feature_store(source, cfg.reader, row_map=row_map, drop_page_cache=cfg.drop_page_cache, **opts)
    if cfg.device == "emulated":  # mmap's page faults (and memory's RAM) are not emulated: the record says so
        store.path_info["device"] = "real (storage.device emulated applies to the direct and buffered readers)"
    return store
