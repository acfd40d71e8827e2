"""The lsm-gnn on-disk dataset format (version 1). Specification: docs/dataset-format.md.

`DatasetWriter` builds a dataset directory under a temporary name and renames it into place on
`commit()`, so an interrupted preparation never leaves a directory that looks complete.
`Dataset` opens one, checking `metadata.json` and naming the file of any problem.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from lsm_gnn.datasets import checksums, validate
from lsm_gnn.datasets.checks import (Checker, index_range_problems, indptr_problems, label_problems,
                                     split_range_problems)
from lsm_gnn.datasets.spec import (BLOCK, CHECKSUM_FILE, FEATURE_FILE, FORMAT_NAME,  # noqa: F401  (re-exported)
                                   FORMAT_VERSION, METADATA_FILE, METADATA_HASH_FILE, row_stride_for, sha256_file,
                                   sha256_line)
from lsm_gnn.utils.atomic import WRITE_ERRNOS, make_parent, remove_leftovers, replace_dir, temp_dir
from lsm_gnn.utils.errors import DataError, InputError, OutputError
from lsm_gnn.utils.locks import exclusive
from lsm_gnn.utils.outpaths import check_output


_warned: set[str] = set()


def _warn_once(root: Path, text: str) -> None:
    """An older dataset without checksums is usable: say so once per dataset and process."""
    key = os.fspath(root.resolve())
    if key not in _warned:
        _warned.add(key)
        warnings.warn(f"{root}: {text}", stacklevel=3)


@dataclass(frozen=True)
class FeatureLayout:
    """Where each feature row lives in `features.bin` (one flat id space over node types)."""

    path: Path
    num_rows: int
    dim: int
    dtype: np.dtype
    row_bytes: int
    row_stride: int
    file_bytes: int
    type_offsets: dict  # node type -> first global row
    checksums: np.ndarray | None = field(default=None, compare=False, repr=False)
    """uint64 xxh3_64 of each row (`checksums.py`; memory-mapped), None for an older dataset."""

    def row_offset(self, row: int) -> int:
        return row * self.row_stride

    @property
    def rows_per_block(self) -> int:
        return max(1, BLOCK // self.row_stride)

    def view(self, mode: str = "r") -> np.ndarray:
        """The rows as a (num_rows, dim) array over a memmap (padding skipped by strides)."""
        raw = np.memmap(self.path, dtype=np.uint8, mode=mode, shape=(self.file_bytes,))
        itemsize = self.dtype.itemsize
        return np.lib.stride_tricks.as_strided(
            raw[: max(self.num_rows * self.row_stride, 1)].view(self.dtype),
            shape=(self.num_rows, self.dim), strides=(self.row_stride, itemsize), writeable=(mode != "r"))

    def load_rows(self, verify: bool = True) -> np.ndarray:
        """Every row in RAM, (num_rows, dim), each checked against its checksum (where the dataset
        has them and `verify`): what the in-memory ideal and the Dist-DGL partitioner hold."""
        rows = np.array(self.view("r"))
        if verify and self.checksums is not None:
            step = max(1, (64 << 20) // max(self.row_bytes, 1))
            for s in range(0, self.num_rows, step):
                ids = np.arange(s, min(s + step, self.num_rows))
                checksums.check_rows(self.path, rows[s: s + step], ids, self.checksums, self.row_bytes)
        return rows


class Dataset:
    """A dataset directory in the lsm-gnn format, opened read-only (arrays are memory-mapped)."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        self._layout = self._check()
        self._checked: set[str] = set()

    def _check(self) -> FeatureLayout:
        """The one checker at level "open" (`checks.py`: metadata against itself and its files'
        sizes and .npy headers; no hashing, nothing that grows with the data), first error raised.
        Returns the feature layout `features()` hands out."""
        checker = Checker(self.root, "open")
        c_problems = checker.run()
        for p in c_problems:
            if p.severity == "error":
                raise p.error(self.root)
        self.meta = checker.meta
        f = self.meta["features"]
        sums = None
        if f.get("checksums"):
            sums = checksums.load(self.root / CHECKSUM_FILE)
        else:
            _warn_once(self.root, "; ".join(str(p) for p in c_problems if p.severity == "warning"))
        return FeatureLayout(path=self.path(f["file"]), num_rows=int(f["num_rows"]), dim=int(f["dim"]),
                             dtype=np.dtype(f["dtype"]), row_bytes=int(f["row_bytes"]),
                             row_stride=int(f["row_stride"]), file_bytes=int(f["file_bytes"]),
                             type_offsets=dict(f["type_offsets"]), checksums=sums)

    # ---- structure -------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.meta["name"]

    @property
    def node_types(self) -> list[str]:
        return list(self.meta["node_types"])

    @property
    def edge_types(self) -> list[str]:
        return list(self.meta["edge_types"])

    @property
    def is_homogeneous(self) -> bool:
        return len(self.node_types) == 1 and len(self.edge_types) == 1

    def num_nodes(self, ntype: str | None = None) -> int:
        if ntype is None:
            return sum(t["num_nodes"] for t in self.meta["node_types"].values())
        return self.meta["node_types"][ntype]["num_nodes"]

    def num_edges(self, etype: str | None = None) -> int:
        if etype is None:
            return sum(e["num_edges"] for e in self.meta["edge_types"].values())
        return self.meta["edge_types"][etype]["num_edges"]

    def edge_type_triple(self, etype: str) -> tuple[str, str, str]:
        e = self.meta["edge_types"][etype]
        return e["src_type"], e["relation"], e["dst_type"]

    def path(self, rel: str) -> Path:
        return self.root / rel

    def _load(self, rel: str, mmap: bool = True) -> np.ndarray:
        p = self.path(rel)
        if not p.is_file():
            raise DataError(p, "missing file listed in metadata.json")
        try:
            return np.load(p, mmap_mode="r" if mmap else None)
        except ValueError as e:
            raise DataError(p, f"not a readable .npy file: {e}") from None

    def _load_checked(self, rel: str, rule) -> np.ndarray:
        """`_load`, and on the first load in this process the values' rule (`checks.py`): a pass over
        an array that its caller is about to read whole anyway (the sampler, the labels)."""
        arr = self._load(rel)
        if rel not in self._checked:
            problems = rule(rel, arr)
            if problems:
                raise problems[0].error(self.root)
            self._checked.add(rel)
        return arr

    def _topology(self, etype: str, kind: str) -> tuple[np.ndarray, np.ndarray]:
        e = self.meta["edge_types"][etype]
        minor = self.num_nodes(e["src_type"] if kind == "csc" else e["dst_type"])
        base = f"topology/{etype}/{kind}"
        indptr = self._load_checked(f"{base}_indptr.npy", lambda r, a: indptr_problems(r, a, e["num_edges"]))
        indices = self._load_checked(f"{base}_indices.npy", lambda r, a: index_range_problems(r, a, minor))
        return indptr, indices

    def csc(self, etype: str) -> tuple[np.ndarray, np.ndarray]:
        """(indptr over destination nodes, source ids): in-edges, what samplers need."""
        return self._topology(etype, "csc")

    def csr(self, etype: str) -> tuple[np.ndarray, np.ndarray]:
        """(indptr over source nodes, destination ids): out-edges."""
        return self._topology(etype, "csr")

    # ---- labels, splits, static scores -----------------------------------------------------
    @property
    def label_type(self) -> str:
        return self.meta["labels"]["node_type"]

    @property
    def num_classes(self) -> int:
        return self.meta["labels"]["num_classes"]

    def labels(self) -> np.ndarray:
        """int64 class per node of the labelled type; -1 where unlabelled."""
        return self._load_checked(f"labels/{self.label_type}.npy",
                                  lambda r, a: label_problems(r, a, self.num_classes))

    def split(self, name: str) -> np.ndarray:
        if name not in ("train", "val", "test"):
            raise ValueError(f"split must be train, val or test, not {name!r}")
        n = self.num_nodes(self.label_type)
        return self._load_checked(f"splits/{name}.npy", lambda r, a: split_range_problems(r, a, n))

    def pagerank_u8(self, ntype: str | None = None) -> np.ndarray:
        """PageRank percentile byte per node (0 = least central, 255 = most)."""
        return self._load(f"static/{ntype or self.label_type}.pagerank_u8.npy")

    def degree(self, ntype: str | None = None) -> np.ndarray:
        return self._load(f"static/{ntype or self.label_type}.degree.npy")

    def static_method(self) -> dict | None:
        """How the static scores were computed (metadata `static`: the PageRank normalisation,
        damping, iterations); None for a dataset written before the metadata recorded it (those
        used the out-degree normalisation)."""
        return self.meta.get("static")

    def static_scores(self) -> np.ndarray:
        """PageRank bytes over the flat feature-row id space (concatenated in type order)."""
        lay = self.features()
        out = np.zeros(lay.num_rows, dtype=np.uint8)
        for t, off in lay.type_offsets.items():
            pr = self.pagerank_u8(t)
            out[off: off + len(pr)] = pr
        return out

    # ---- features --------------------------------------------------------------------------
    def features(self) -> FeatureLayout:
        """The feature layout, checked against metadata.json and the file's size when opened."""
        return self._layout

    def feature_array(self) -> np.ndarray:
        """All features as a (rows, dim) read-only memmap view (for the in-memory ideal and tests)."""
        return self.features().view("r")

    def __repr__(self) -> str:
        return (f"Dataset({self.name!r}, nodes={self.num_nodes()}, edges={self.num_edges()}, "
                f"types={self.node_types})")


# the folders of a dataset that other writers of this project add (lsm_gnn.multidevice.owner_files)
_OWNED_FOLDER_PREFIXES = ("owners-",)


# The top-level names a dataset folder of this format holds (DatasetWriter: the feature file and its
# checksums, the metadata's hash, and the folders its arrays are saved under)
_TOP_LEVEL = (FEATURE_FILE, CHECKSUM_FILE, METADATA_HASH_FILE, "labels", "splits", "static", "topology")
_METADATA_HASH_LINE = re.compile(r"[0-9a-f]{64}  " + re.escape(METADATA_FILE) + r"\n?")


def _metadata_removed(path: Path, entries: list[Path]) -> bool:
    """A dataset this project wrote whose metadata.json alone is gone: Snakemake deletes a killed
    job's declared output (a dataset rule's metadata.json) before it reruns the job, which passes
    --force. Recognised by the metadata's hash file (`sha256sum -c` format, which only the writer
    writes), every top-level name the format's own and no symbolic link anywhere."""
    hash_file = path / METADATA_HASH_FILE
    try:
        line = hash_file.read_text() if hash_file.is_file() and not hash_file.is_symlink() else ""
    except (OSError, UnicodeDecodeError):
        return False
    if not _METADATA_HASH_LINE.fullmatch(line):
        return False
    tops = {p.relative_to(path).parts[0] for p in entries}
    return (all(t in _TOP_LEVEL or t.startswith(_OWNED_FOLDER_PREFIXES) for t in tops)
            and not any(p.is_symlink() for p in entries))


def check_dataset_output(root: str | os.PathLike, overwrite: bool = False) -> Path:
    """The one check of a dataset folder to be written, before any work: the output path rule
    (lsm_gnn.utils.outpaths: a folder or nothing, never a symbolic link, a name the file system
    takes); what is there is replaced only with `overwrite` (CLI: --force), and only when it is a
    dataset this project wrote: an empty folder, or a folder whose metadata.json says format
    lsm-gnn and every file of which that metadata (or an owner-file folder) accounts for, or one
    whose metadata.json alone was removed (`_metadata_removed`: Snakemake's rerun). Anything
    else -- a folder of the user's files, `.` -- is refused and nothing is removed. Returns the
    path to write (absolute where the given one names no folder, such as `.`)."""
    given = Path(root)
    path = check_output(root, "dir", "dataset folder")
    if given.name in ("", ".", ".."):
        given = path
    if not os.path.lexists(path):
        return given
    if not overwrite:
        raise InputError(f"{given}: already exists; pass overwrite=True (CLI: --force) to replace it "
                         "(only a dataset folder this project wrote is replaced)")
    entries = sorted(path.rglob("*"))
    if not entries:
        return given
    meta_path = path / METADATA_FILE
    try:
        meta = json.loads(meta_path.read_text()) if meta_path.is_file() and not meta_path.is_symlink() else None
    except (OSError, ValueError):
        meta = None
    if meta is None and not os.path.lexists(meta_path) and _metadata_removed(path, entries):
        return given
    if not isinstance(meta, dict) or meta.get("format") != FORMAT_NAME or not isinstance(meta.get("files"), dict):
        raise OutputError(given, f"--force replaces only a dataset folder this project wrote, and this one has no "
                                 f"{METADATA_FILE} of format {FORMAT_NAME!r} with its file list; nothing was "
                                 "removed (choose another output folder, or empty this one yourself)")
    known = set(meta["files"]) | {METADATA_FILE, METADATA_HASH_FILE}
    foreign = []
    for p in entries:
        rel = p.relative_to(path).as_posix()
        if rel.split("/")[0].startswith(_OWNED_FOLDER_PREFIXES) and not p.is_symlink():
            continue
        if p.is_symlink() or (p.is_file() and rel not in known) or not (p.is_file() or p.is_dir()):
            foreign.append(rel)
    if foreign:
        raise OutputError(given, f"--force replaces only what this project wrote, and {len(foreign)} file(s) here are "
                                 f"not in its {METADATA_FILE}: {', '.join(foreign[:5])}"
                                 f"{' ...' if len(foreign) > 5 else ''}; nothing was removed")
    return given


class DatasetWriter:
    """Builds a dataset directory; `commit()` writes metadata.json and renames it into place."""

    def __init__(self, root: str | os.PathLike, name: str, source: dict | None = None, overwrite: bool = False):
        self.root = check_dataset_output(root, overwrite)
        # one writer per directory (a second is refused); a killed writer's temporary copy is removed
        make_parent(self.root)
        self._lock = contextlib.ExitStack()
        self._lock.enter_context(exclusive(self.root, "dataset directory"))
        try:
            remove_leftovers(self.root)
            self.tmp = temp_dir(self.root)
        except BaseException:
            self._lock.close()
            raise
        self.meta: dict = {"format": FORMAT_NAME, "format_version": FORMAT_VERSION, "name": name,
                           "source": source or {}, "node_types": {}, "edge_types": {},
                           "features": None, "labels": None, "splits": {}, "files": {}}
        self._hashes: dict[str, str] = {}
        self._committed = False
        self._labels: np.ndarray | None = None
        self._splits: tuple[dict, dict] | None = None
        self._static: set[str] = set()
        self._unlabelled_ok: tuple[str, ...] = ()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None or not self._committed:
            self.abort()
        if exc_type is not None and issubclass(exc_type, OSError) and exc.errno in WRITE_ERRNOS:
            raise OutputError.from_os_error(self.root, exc) from None

    def abort(self):
        shutil.rmtree(self.tmp, ignore_errors=True)
        self._lock.close()

    def _save(self, rel: str, arr: np.ndarray):
        p = self.tmp / rel
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            np.save(p, arr)
        except OSError as e:
            if e.errno is None:  # numpy's short write ("N requested and M written"): the disk is full
                raise OutputError(self.root, f"cannot write {rel}: {e} (the file system is full or a "
                                             "file-size limit was reached)") from None
            raise

    def add_node_type(self, ntype: str, num_nodes: int):
        n = validate.node_count(num_nodes, f"add_node_type({ntype!r})")
        self.meta["node_types"][ntype] = {"num_nodes": n}

    def _num_nodes(self, ntype: str, origin) -> int:
        if ntype not in self.meta["node_types"]:
            validate.fail(origin, f"node type {ntype!r} not declared (call add_node_type first)",
                          expected=f"one of {sorted(self.meta['node_types'])}", found=repr(ntype))
        return self.meta["node_types"][ntype]["num_nodes"]

    def add_edges(self, src_type: str, relation: str, dst_type: str, src: np.ndarray, dst: np.ndarray, *,
                  origin=None):
        """Store one relation as CSC (by destination) and CSR (by source), int64, sorted neighbours.

        Ids must be integers (floats are refused, never truncated) within the node counts;
        `origin` (a path or an argument name) is what errors name.
        """
        etype = f"{src_type}__{relation}__{dst_type}"
        origin = origin if origin is not None else f"add_edges({etype})"
        n_src = self._num_nodes(src_type, origin)
        n_dst = self._num_nodes(dst_type, origin)
        src = validate.integer_ids(src, origin, "src", what="node ids")
        dst = validate.integer_ids(dst, origin, "dst", what="node ids")
        if src.shape != dst.shape:
            validate.fail(origin, "fields src and dst: one source and one destination per edge",
                          expected="equal lengths", found=f"{src.size} and {dst.size}")
        validate.ids_in_range(src, n_src, origin, "src", entry="edge")
        validate.ids_in_range(dst, n_dst, origin, "dst", entry="edge")
        for kind, major, minor, n in (("csc", dst, src, n_dst), ("csr", src, dst, n_src)):
            order = np.lexsort((minor, major))
            indptr = np.zeros(n + 1, dtype=np.int64)
            np.cumsum(np.bincount(major, minlength=n), out=indptr[1:])
            self._save(f"topology/{etype}/{kind}_indptr.npy", indptr)
            self._save(f"topology/{etype}/{kind}_indices.npy", minor[order])
            del order
        self.meta["edge_types"][etype] = {"src_type": src_type, "relation": relation, "dst_type": dst_type,
                                          "num_edges": int(src.size)}
        return etype

    def add_csc(self, src_type: str, relation: str, dst_type: str, indptr: np.ndarray, indices: np.ndarray, *,
                origin=None):
        """Store a relation given directly as CSC (derives the CSR)."""
        etype = f"{src_type}__{relation}__{dst_type}"
        origin = origin if origin is not None else f"add_csc({etype})"
        n_dst = self._num_nodes(dst_type, origin)
        indptr = validate.integer_ids(indptr, origin, "indptr", what="offsets")
        indices = validate.integer_ids(indices, origin, "indices", what="node ids")
        if indptr.shape != (n_dst + 1,) or indptr[0] != 0 or indptr[-1] != indices.size or (np.diff(indptr) < 0).any():
            validate.fail(origin, "field indptr: CSC offsets over the destination nodes",
                          expected=f"{n_dst + 1} non-decreasing offsets from 0 to {indices.size}",
                          found=f"{indptr.size} offsets from {indptr[:1].tolist()} to {indptr[-1:].tolist()}")
        dst = np.repeat(np.arange(len(indptr) - 1, dtype=np.int64), np.diff(indptr))
        return self.add_edges(src_type, relation, dst_type, indices, dst, origin=origin)

    def feature_file(self, dim: int, dtype="float32", type_order: list[str] | None = None) -> "FeatureFileWriter":
        """Open features.bin for streaming rows in global-id order (node types concatenated)."""
        order = type_order or list(self.meta["node_types"])
        offsets, total = {}, 0
        for t in order:
            offsets[t] = total
            total += self.meta["node_types"][t]["num_nodes"]
        return FeatureFileWriter(self, dim, np.dtype(dtype), offsets, total)

    def set_labels(self, ntype: str, labels: np.ndarray, num_classes: int, *, origin=None):
        """int64 class per node of `ntype` (-1 = unlabelled), each below `num_classes`."""
        origin = origin if origin is not None else f"set_labels({ntype!r})"
        n = self._num_nodes(ntype, origin)
        labels = validate.labels(labels, n, num_classes, origin)
        self._save(f"labels/{ntype}.npy", labels)
        self.meta["labels"] = {"node_type": ntype, "num_classes": int(num_classes),
                               "num_labeled": int((labels >= 0).sum())}
        self._labels = labels
        if self._splits is not None:
            self._check_splits(*self._splits)

    def set_splits(self, train: np.ndarray, val: np.ndarray, test: np.ndarray, *, origins: dict | None = None,
                   unlabelled_ok: tuple[str, ...] = ()):
        """Node ids of the labelled type: integers in range, pairwise disjoint and (checked once the
        labels are set, whichever comes first) labelled, except in the splits named in
        `unlabelled_ok` (MAG240M's test labels are hidden). `origins` maps a split name to what
        errors name (a path or an argument)."""
        origins = {k: (origins or {}).get(k, f"set_splits({k})") for k in ("train", "val", "test")}
        self._unlabelled_ok = tuple(unlabelled_ok)
        if self.meta["labels"] is not None:
            n = self.meta["node_types"][self.meta["labels"]["node_type"]]["num_nodes"]
        elif len(self.meta["node_types"]) == 1:
            n = next(iter(self.meta["node_types"].values()))["num_nodes"]
        else:
            n = None  # the labelled type is not known yet: ranges are checked with the labels
        parts = {"train": train, "val": val, "test": test}
        if n is not None:
            parts = validate.splits(parts, n, None, origins)
        else:
            parts = {k: validate.integer_ids(v, origins[k], k, what="split ids") for k, v in parts.items()}
        self._splits = (parts, origins)
        if self._unlabelled_ok:  # so that `dataset verify` accepts them too
            self.meta["splits_unlabelled_ok"] = list(self._unlabelled_ok)
        if self.meta["labels"] is not None:
            self._check_splits(parts, origins)
        for name, ids in parts.items():
            self._save(f"splits/{name}.npy", ids)
            self.meta["splits"][name] = int(ids.size)

    def _check_splits(self, parts: dict, origins: dict):
        n = self.meta["node_types"][self.meta["labels"]["node_type"]]["num_nodes"]
        validate.splits(parts, n, self._labels, origins, unlabelled_ok=self._unlabelled_ok)

    def set_static(self, ntype: str, pagerank_u8: np.ndarray, degree: np.ndarray, *, origin=None):
        """PageRank percentile byte (integers 0..255) and degree (integers >= 0) per node of `ntype`."""
        origin = origin if origin is not None else f"set_static({ntype!r})"
        n = self._num_nodes(ntype, origin)
        pagerank_u8, degree = validate.static_scores(pagerank_u8, degree, n, origin)
        self._save(f"static/{ntype}.pagerank_u8.npy", np.asarray(pagerank_u8, dtype=np.uint8))
        self._save(f"static/{ntype}.degree.npy", np.asarray(degree, dtype=np.int64))
        self._static.add(ntype)

    def set_static_method(self, method: dict):
        """How the static scores were computed (`pagerank.method()`), recorded as metadata `static`."""
        self.meta["static"] = dict(method)

    def add_static_scores(self, type_order: list[str] | None = None, *, normalisation: str | None = None):
        """PageRank byte and degree of every node type from the relations added so far (on the
        homogeneous view; `pagerank.static_scores` with `normalisation`, the authors' in-degree by
        default), stored with `set_static`; the method is recorded in the metadata."""
        from lsm_gnn.datasets.pagerank import NORMALISATION, method, static_scores

        normalisation = normalisation or NORMALISATION
        self.set_static_method(method(normalisation))

        counts = {t: v["num_nodes"] for t, v in self.meta["node_types"].items()}
        rels = []
        for et, e in self.meta["edge_types"].items():
            indptr = np.load(self.tmp / f"topology/{et}/csc_indptr.npy", mmap_mode="r")
            indices = np.load(self.tmp / f"topology/{et}/csc_indices.npy", mmap_mode="r")
            rels.append((e["src_type"], e["dst_type"], indptr, indices))
        for t, (pr, deg) in static_scores(counts, rels, type_order, normalisation=normalisation).items():
            self.set_static(t, pr, deg)

    def add_checksums(self, sums: np.ndarray) -> None:
        """Store the rows' checksums (`checksums.py`) beside features.bin and name them in the metadata."""
        checksums.save(self.tmp / CHECKSUM_FILE, sums)
        self.meta["features"]["checksums"] = {"file": CHECKSUM_FILE, "algorithm": checksums.ALGORITHM, "unit": "row"}

    def commit(self) -> Dataset:
        if self.meta["features"] is None:
            raise ValueError("no features written (use feature_file())")
        if self.meta["labels"] is None:
            raise ValueError("no labels set (use set_labels())")
        missing = [t for t in self.meta["node_types"] if t not in self._static]
        if missing:
            validate.fail("DatasetWriter.commit", "static scores missing for node types " + ", ".join(missing),
                          expected="set_static() or add_static_scores() for every node type", found="none")
        f = self.meta["features"]
        if not f.get("checksums"):  # a writer that did not hash its rows (a linked or copied file)
            sums = checksums.file_checksums(self.tmp / f["file"], f["num_rows"], f["row_stride"], f["row_bytes"])
            self.add_checksums(sums)
        # one identity for the dataset's files (checked on open: foreign features + checksums are refused)
        f["checksums"]["identity"] = checksums.identity(checksums.load(self.tmp / CHECKSUM_FILE))
        files = {}
        for p in sorted(self.tmp.rglob("*")):
            if p.is_file():
                rel = p.relative_to(self.tmp).as_posix()
                files[rel] = {"bytes": p.stat().st_size, "sha256": self._hashes.get(rel) or sha256_file(p)}
        self.meta["files"] = files
        text = (json.dumps(self.meta, indent=2) + "\n").encode()
        (self.tmp / METADATA_FILE).write_bytes(text)
        (self.tmp / METADATA_HASH_FILE).write_text(sha256_line(text))  # what `dataset verify` checks
        replace_dir(self.tmp, self.root)
        self._committed = True
        self._lock.close()
        return Dataset(self.root)


def encode_rows(rows: np.ndarray, dim: int, dtype: np.dtype, row_stride: int, room: int) -> memoryview:
    """The bytes of `rows` as stored in features.bin (each row zero-padded to `row_stride`)."""
    rows = np.ascontiguousarray(rows, dtype=dtype)
    if rows.ndim != 2 or rows.shape[1] != dim:
        raise ValueError(f"feature rows: expected shape (n, {dim}), found {rows.shape}")
    if len(rows) > room:
        raise ValueError(f"feature rows: {len(rows)} more rows than the {room} still declared")
    row_bytes = dim * np.dtype(dtype).itemsize
    if row_stride != row_bytes:
        padded = np.zeros((len(rows), row_stride), dtype=np.uint8)
        padded[:, :row_bytes] = rows.view(np.uint8).reshape(len(rows), -1)
        rows = padded
    return memoryview(rows).cast("B")


class FeatureFileWriter:
    """Streams feature rows to features.bin with the padded stride; hashes while writing."""

    def __init__(self, writer: DatasetWriter, dim: int, dtype: np.dtype, offsets: dict, total: int):
        self.w, self.dim, self.dtype, self.offsets, self.total = writer, dim, dtype, offsets, total
        self.row_bytes = dim * dtype.itemsize
        self.row_stride = row_stride_for(self.row_bytes)
        self.path = writer.tmp / FEATURE_FILE
        self.f = open(self.path, "wb")
        self.h = hashlib.sha256()
        self.rows = 0
        self.sums: list[np.ndarray] = []  # per-row checksums, computed from the bytes written

    def __enter__(self):
        return self

    def write(self, rows: np.ndarray):
        """Append rows (n, dim) in global-id order."""
        mv = encode_rows(rows, self.dim, self.dtype, self.row_stride, room=self.total - self.rows)
        self.f.write(mv)
        self.h.update(mv)
        n = len(mv) // self.row_stride
        self.sums.append(checksums.row_checksums(np.frombuffer(mv, np.uint8).reshape(n, self.row_stride),
                                                 self.row_bytes))
        self.rows += n

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:
            self.f.close()

    def close(self):
        if self.rows != self.total:
            self.f.close()
            raise ValueError(f"feature rows: wrote {self.rows}, declared {self.total}")
        data_bytes = self.rows * self.row_stride
        pad = (-data_bytes) % BLOCK  # whole last block, so O_DIRECT reads never run short
        if pad:
            z = b"\0" * pad
            self.f.write(z)
            self.h.update(z)
        self.f.close()
        self.w._hashes[FEATURE_FILE] = self.h.hexdigest()
        self.w.meta["features"] = {"file": FEATURE_FILE, "num_rows": self.total, "dim": self.dim,
                                   "dtype": self.dtype.name, "row_bytes": self.row_bytes,
                                   "row_stride": self.row_stride, "file_bytes": data_bytes + pad,
                                   "type_offsets": self.offsets}
        self.w.add_checksums(np.concatenate(self.sums) if self.sums else np.zeros(0, np.uint64))
