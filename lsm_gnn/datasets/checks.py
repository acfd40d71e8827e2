"""The one dataset checker: every rule of docs/dataset-format.md, written once.

`check(root, level)` returns every `Problem` it finds (an empty list: sound). `Dataset(path)` runs
level "open" and raises the first error as a `DataError`; `lsm-gnn dataset verify` runs "quick" or
"full" and reports them all. Every problem names its file (relative to the dataset root), the field
and, where there is one, the expected and the found value.

Levels, by what they cost:
- "open": metadata.json against itself (fields, types, counts, the allowed feature dtypes, the
  row-stride and padding rules) and against its files: the size of features.bin, every .npy
  header (dtype, shape, truncation), both ends of every indptr, the row-checksum file's header.
  Stat calls and header reads: the cost does not grow with the data.
- "quick": also every value of the index, label, split and static arrays (monotone offsets, ids
  and labels in range, disjoint labelled splits, CSC and CSR describing the same edges), the size
  and sha256 of every listed file but features.bin, metadata.json against metadata.sha256, and
  files that metadata.json does not list.
- "full": also one pass over features.bin: its sha256, every row against its checksum, non-finite
  values, zero padding.

The array rules a reader applies when it first loads an array (`Dataset.csc`, `labels`, `split`:
monotone offsets and ids in range, a pass over an array the caller is about to read anyway) are the
functions `indptr_problems`, `index_range_problems`, `label_problems` and `split_range_problems`,
which the checker runs too.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lsm_gnn.datasets import checksums
from lsm_gnn.datasets.spec import (BLOCK, CHECKSUM_FILE, FEATURE_DTYPES, FORMAT_NAME, FORMAT_VERSION,
                                   HASH_CHUNK, METADATA_FILE, METADATA_HASH_FILE, SPLITS, npy_header,
                                   padded_file_bytes, row_stride_for, sha256_file)
from lsm_gnn.utils.errors import DataError

LEVELS = ("open", "quick", "full")
CHECK_CHUNK = 1 << 22  # elements per pass over big index arrays (bounded memory)
M = METADATA_FILE
# Per-owner feature files derived from the dataset and kept beside it (lsm_gnn.multidevice.owner_files,
# which checks its own manifest against features.bin's checksum).
DERIVED_DIR = re.compile(r"owners-\d+")
UPGRADE = "`lsm-gnn dataset verify --write-checksums` adds it"


@dataclass(frozen=True)
class Problem:
    file: str       # path relative to the dataset root ("metadata.json", "features.bin", ...; "." the root)
    message: str
    severity: str = "error"   # "warning": the dataset is usable (an older one without checksums)

    def __str__(self) -> str:
        return f"{self.file}: {self.message}"

    def error(self, root: str | os.PathLike) -> DataError:
        root = Path(root)
        return DataError(root if self.file == "." else root / self.file, self.message)


def _from_error(file: str, e: DataError) -> Problem:
    msg = e.problem
    if e.expected is not None or e.found is not None:
        msg += f" (expected {e.expected}, found {e.found})"
    return Problem(file, msg)


def _non_finite(obj, path: str = ""):
    """(dotted path, value) of the first non-finite number in a JSON value, None when all are finite."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return path or "(root)", obj
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else ()
    for k, v in items:
        found = _non_finite(v, f"{path}.{k}" if path else str(k))
        if found is not None:
            return found
    return None


def _is_count(v, low: int = 0) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= low


# ---- array rules (also run by Dataset when it first loads an array) -------------------------------
def indptr_problems(rel: str, indptr: np.ndarray, num_edges: int, ends_only: bool = False) -> list[Problem]:
    """Offsets start at 0, end at the edge count and never decrease (`ends_only`: the two ends)."""
    out = []
    if indptr.size == 0:
        return [Problem(rel, "indptr: expected at least one offset, found none")]
    if indptr[0] != 0:
        out.append(Problem(rel, f"indptr[0]: expected 0, found {indptr[0]}"))
    if indptr[-1] != num_edges:
        out.append(Problem(rel, f"indptr[-1]: expected num_edges={num_edges}, found {indptr[-1]}"))
    if ends_only:
        return out
    for start in range(0, indptr.size - 1, CHECK_CHUNK):
        part = np.asarray(indptr[start: start + CHECK_CHUNK + 1])
        drops = np.flatnonzero(np.diff(part) < 0)
        if drops.size:
            i = start + int(drops[0])
            out.append(Problem(rel, f"not monotone: indptr[{i + 1}]={indptr[i + 1]} < indptr[{i}]={indptr[i]} "
                               "(offsets must not decrease)"))
            break
    return out


def index_range_problems(rel: str, indices: np.ndarray, n_minor: int) -> list[Problem]:
    """Every id in [0, n_minor); the first bad entry is named."""
    for start in range(0, indices.size, CHECK_CHUNK):
        part = np.asarray(indices[start: start + CHECK_CHUNK])
        if part.size and (part.min() < 0 or part.max() >= n_minor):
            bad = int(np.flatnonzero((part < 0) | (part >= n_minor))[0])
            return [Problem(rel, f"id out of range: entry {start + bad} is {part[bad]}, expected [0, {n_minor})")]
    return []


def label_problems(rel: str, labels: np.ndarray, num_classes: int, num_labeled: int | None = None) -> list[Problem]:
    """Each label -1 (unlabelled) or a class in [0, num_classes); the labelled count as stated."""
    arr = np.asarray(labels)
    out = []
    if arr.size and (arr.min() < -1 or arr.max() >= num_classes):
        bad = int(np.flatnonzero((arr < -1) | (arr >= num_classes))[0])
        out.append(Problem(rel, f"label out of range: node {bad} has {arr[bad]}, expected -1 or [0, {num_classes})"))
    if num_labeled is not None:
        labeled = int((arr >= 0).sum())
        if num_labeled != labeled:
            out.append(Problem(rel, f"labelled count: metadata says {num_labeled}, file has {labeled} "
                               "(metadata.json field labels.num_labeled)"))
    return out


def split_range_problems(rel: str, ids: np.ndarray, n: int) -> list[Problem]:
    arr = np.asarray(ids)
    if arr.size and (arr.min() < 0 or arr.max() >= n):
        bad = int(np.flatnonzero((arr < 0) | (arr >= n))[0])
        return [Problem(rel, f"id out of range: entry {bad} is {arr[bad]}, expected [0, {n})")]
    return []


# ---- the checker ---------------------------------------------------------------------------------
class Checker:
    def __init__(self, root: str | os.PathLike, level: str = "open", progress: bool = False):
        if level not in LEVELS:
            raise ValueError(f"level must be one of {', '.join(LEVELS)}, not {level!r}")
        self.root, self.level, self.progress = Path(root), level, progress
        self.problems: list[Problem] = []
        self.meta: dict = {}
        self.raw = b""
        self.counts: dict[str, int] = {}
        self.edges: dict[str, tuple[str, str, int]] = {}
        self.features: dict | None = None     # the parsed layout, when metadata.json's part is sound
        self.label_type: str | None = None
        self.headers_ok: set[str] = set()     # array files whose header matched

    def add(self, file: str, message: str, severity: str = "error"):
        self.problems.append(Problem(file, message, severity))

    def run(self) -> list[Problem]:
        if self.metadata():
            self.semantics()
            self.headers()
            if self.level != "open":
                self.files()
                self.values()
                self.feature_values()
        return self.problems

    # ---- metadata.json alone -------------------------------------------------------------------
    def metadata(self) -> bool:
        if not self.root.is_dir():
            self.add(".", f"dataset directory {self.root} does not exist")
            return False
        p = self.root / M
        if not p.is_file():
            self.add(M, "missing; not an lsm-gnn dataset directory "
                     "(create one with `lsm-gnn dataset generate` or `prepare`)")
            return False
        try:
            self.raw = p.read_bytes()
            meta = json.loads(self.raw)
        except OSError as e:
            self.add(M, f"cannot be read: {e.strerror}")
            return False
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            self.add(M, f"not valid JSON ({e})")
            return False
        if not isinstance(meta, dict):
            self.add(M, f"expected a JSON object, found {type(meta).__name__}")
            return False
        bad = _non_finite(meta)
        if bad is not None:  # 1e400 reads as inf: no count, size or offset is that
            self.add(M, f"field {bad[0]}: a number must be finite (found {bad[1]!r}: beyond the float range or NaN)")
            return False
        self.meta = meta
        ok = True
        if meta.get("format") != FORMAT_NAME:
            self.add(M, f"field format: expected {FORMAT_NAME!r}, found {meta.get('format')!r}")
            ok = False
        if meta.get("format_version") != FORMAT_VERSION:
            self.add(M, f"field format_version: expected {FORMAT_VERSION}, found {meta.get('format_version')!r}")
            ok = False
        if not ok:  # another format: its other fields mean something else
            return False
        for key in ("name", "node_types", "edge_types", "features", "labels", "splits", "files"):
            if key not in meta:
                self.add(M, f"missing field {key}")
                ok = False
            elif key != "name" and not isinstance(meta[key], dict):
                self.add(M, f"field {key}: expected a JSON object, found {type(meta[key]).__name__}")
                ok = False
        if not ok:
            return False
        for t, info in meta["node_types"].items():
            n = info.get("num_nodes") if isinstance(info, dict) else None
            if not _is_count(n):
                self.add(M, f"field node_types.{t}.num_nodes: expected an integer >= 0, found {n!r}")
                ok = False
            else:
                self.counts[t] = n
        return ok

    def _declared(self, field: str, value) -> bool:
        if value in self.counts:
            return True
        self.add(M, f"field {field}: not a declared node type (expected one of {sorted(self.counts)}, "
                 f"found {value!r})")
        return False

    def semantics(self):
        """metadata.json agrees with itself, and features.bin's size with it."""
        m, counts = self.meta, self.counts
        for et, e in m["edge_types"].items():
            if not isinstance(e, dict):
                self.add(M, f"field edge_types.{et}: expected a JSON object, found {e!r:.40}")
                continue
            good = self._declared(f"edge_types.{et}.src_type", e.get("src_type"))
            good = self._declared(f"edge_types.{et}.dst_type", e.get("dst_type")) and good
            if not _is_count(e.get("num_edges")):
                self.add(M, f"field edge_types.{et}.num_edges: expected an integer >= 0, found {e.get('num_edges')!r}")
                good = False
            if good:
                self.edges[et] = (e["src_type"], e["dst_type"], e["num_edges"])
        self._features_meta()
        lab = m["labels"]
        lt = lab.get("node_type")
        if self._declared("labels.node_type", lt):
            self.label_type = lt
            nc, nl = lab.get("num_classes"), lab.get("num_labeled")
            if not _is_count(nc, 1):
                self.add(M, f"field labels.num_classes: expected an integer >= 1, found {nc!r}")
            if not _is_count(nl) or nl > counts[lt]:
                self.add(M, f"field labels.num_labeled: must lie in [0, num_nodes of {lt}] "
                         f"(expected [0, {counts[lt]}], found {nl!r})")
        sizes_ok = True
        for name, k in m["splits"].items():
            if name not in SPLITS or not _is_count(k):
                self.add(M, f"field splits.{name}: a split (train, val, test) size must be an integer >= 0 "
                         f"(found {k!r})")
                sizes_ok = False
        if sizes_ok and self.label_type is not None and sum(m["splits"].values()) > counts[lt]:
            self.add(M, f"field splits: split sizes sum to more than the {lt} nodes (splits hold distinct nodes) "
                     f"(expected at most {counts[lt]}, found {sum(m['splits'].values())})")

    def _features_meta(self):
        f = self.meta["features"]
        try:
            rel = f["file"]
            if not isinstance(rel, str):
                raise TypeError(f"file must be a string, found {rel!r}")
            for k in ("dim", "num_rows", "row_stride", "row_bytes", "file_bytes"):  # never int(16.5) == 16
                if not _is_count(f[k]):
                    raise ValueError(f"features.{k} must be an integer >= 0, found {f[k]!r}")
            dim, rows, stride = f["dim"], f["num_rows"], f["row_stride"]
            row_bytes, file_bytes, offsets = f["row_bytes"], f["file_bytes"], dict(f["type_offsets"])
            dtype = np.dtype(f["dtype"])
        except (KeyError, TypeError, ValueError) as e:
            self.add(M, f"field features: malformed ({type(e).__name__}: {e})")
            return
        ok = True
        if dtype.name not in FEATURE_DTYPES:
            self.add(M, f"field features.dtype: not a feature dtype of the format "
                     f"(expected one of {', '.join(FEATURE_DTYPES)}, found {f['dtype']!r})")
            ok = False
        if dim < 1 or rows < 0:
            self.add(M, f"field features: dim must be >= 1 and num_rows >= 0 (found dim {dim}, num_rows {rows})")
            return
        if row_bytes != dim * dtype.itemsize:
            self.add(M, f"field features.row_bytes: expected dim x itemsize = {dim * dtype.itemsize}, found {row_bytes}")
            ok = False
        want_stride = row_stride_for(max(row_bytes, 1))
        if stride != want_stride:
            self.add(M, f"field features.row_stride: expected {want_stride}, found {stride} (rows of {row_bytes} bytes)")
            ok = False
        featured = 0
        for t, off in offsets.items():
            if not self._declared("features.type_offsets", t):
                ok = False
                continue
            if off != featured:
                self.add(M, f"field features.type_offsets.{t}: node types must follow each other from row 0 "
                         f"(expected {featured}, found {off})")
                ok = False
            featured += self.counts[t]
        path = self.root / rel
        if not path.is_file():
            self.add(rel, "missing (the feature file named by metadata.json field features.file)")
            return
        size = path.stat().st_size
        need = rows * stride
        if size < need:
            self.add(rel, f"too small for metadata.json field features.num_rows = {rows} (rows of {stride} bytes) "
                     f"(expected at least {need} bytes, found {size} bytes)")
            ok = False
        if rows != featured:
            self.add(M, "field features.num_rows: disagrees with node_types: the featured types ("
                     + ", ".join(offsets) + f") have that many nodes (expected {featured}, found {rows})")
            ok = False
        padded = padded_file_bytes(rows, stride)
        if file_bytes != padded:
            self.add(M, f"field features.file_bytes: expected {padded} (num_rows x row_stride padded to whole "
                     f"{BLOCK}-byte blocks), found {file_bytes}")
            ok = False
        elif size != file_bytes and size >= need:
            self.add(rel, f"size: expected {file_bytes} bytes (metadata.json field features.file_bytes), found {size}")
            ok = False
        cs = f.get("checksums")
        if cs is None:
            self.add(rel, f"no row checksums: reads are not verified (an older dataset; {UPGRADE})", "warning")
        elif not isinstance(cs, dict) or cs.get("file") != CHECKSUM_FILE or cs.get("algorithm") != checksums.ALGORITHM:
            self.add(M, f"field features.checksums: expected {{'file': {CHECKSUM_FILE!r}, 'algorithm': "
                     f"{checksums.ALGORITHM!r}, 'unit': 'row'}}, found {cs!r:.80}")
            ok = False
        if ok:
            self.features = {"rel": rel, "path": path, "num_rows": rows, "dim": dim, "dtype": dtype,
                             "row_bytes": row_bytes, "row_stride": stride, "file_bytes": file_bytes,
                             "type_offsets": offsets, "checksums": cs is not None}

    # ---- every array file's header -------------------------------------------------------------
    def arrays(self) -> list[tuple[str, np.dtype, tuple, str]]:
        """(file, dtype, shape, the metadata field its length comes from) of every array file."""
        out = []
        for et, (s, d, ne) in self.edges.items():
            for kind, major in (("csc", d), ("csr", s)):
                out.append((f"topology/{et}/{kind}_indptr.npy", np.int64, (self.counts[major] + 1,),
                            f"node_types.{major}.num_nodes + 1"))
                out.append((f"topology/{et}/{kind}_indices.npy", np.int64, (ne,), f"edge_types.{et}.num_edges"))
        lt = self.label_type
        if lt is not None:
            out.append((f"labels/{lt}.npy", np.int64, (self.counts[lt],), f"node_types.{lt}.num_nodes"))
        for name, k in self.meta["splits"].items():
            if name in SPLITS and _is_count(k):
                out.append((f"splits/{name}.npy", np.int64, (k,), f"splits.{name}"))
        for t, n in self.counts.items():
            out.append((f"static/{t}.pagerank_u8.npy", np.uint8, (n,), f"node_types.{t}.num_nodes"))
            out.append((f"static/{t}.degree.npy", np.int64, (n,), f"node_types.{t}.num_nodes"))
        if self.features is not None and self.features["checksums"]:
            out.append((CHECKSUM_FILE, np.uint64, (self.features["num_rows"],), "features.num_rows"))
        return out

    def headers(self):
        listed = self.meta["files"]
        for rel, dtype, shape, field in self.arrays():
            p = self.root / rel
            if not p.is_file():
                if rel in listed or self.level != "open":
                    self.add(rel, "missing (listed in metadata.json)" if rel in listed else "missing")
                continue  # not written (an older dataset): an error when it is used
            try:
                found_shape, found_dtype = npy_header(p)
            except DataError as e:
                self.problems.append(_from_error(rel, e))
                continue
            if found_dtype != np.dtype(dtype):
                self.add(rel, f"dtype: expected {np.dtype(dtype)}, found {found_dtype}")
            elif found_shape != shape:
                self.add(rel, f"shape: expected {shape}, found {found_shape} (metadata.json field {field})")
            else:
                self.headers_ok.add(rel)
        self.identity()
        for et, (_, _, ne) in self.edges.items():  # the two ends of every offset array: O(1)
            for kind in ("csc", "csr"):
                rel = f"topology/{et}/{kind}_indptr.npy"
                if rel in self.headers_ok:
                    self.problems += indptr_problems(rel, np.load(self.root / rel, mmap_mode="r"), ne, ends_only=True)

    def identity(self):
        """The feature file and its checksums belong to this metadata (O(1): 64 rows): the checksums of
        `checksums.identity_rows` hash to features.checksums.identity, and those rows of the feature
        file match them. A feature file and checksum file swapped in from another dataset agree with
        each other, so only this catches them before training on them."""
        f = self.features
        cs = self.meta["features"].get("checksums") if f else None
        if not f or not isinstance(cs, dict) or CHECKSUM_FILE not in self.headers_ok:
            return
        want = cs.get("identity")
        if want is None:
            return  # written before identities: the row checks still hold
        sums = checksums.load(self.root / CHECKSUM_FILE)
        if not isinstance(want, str) or checksums.identity(sums) != want:
            self.add(CHECKSUM_FILE, f"not this dataset's checksums: their identity differs from metadata.json "
                     f"features.checksums.identity (expected {str(want)[:20]}, found {checksums.identity(sums)}); the "
                     "feature file and its checksums were replaced, perhaps from another dataset")
            return
        rows = checksums.identity_rows(f["num_rows"])
        if not rows.size or not f["path"].is_file() or f["path"].stat().st_size < f["num_rows"] * f["row_stride"]:
            return  # a short or missing feature file is named by its own check
        with open(f["path"], "rb") as fh:
            got = np.frombuffer(b"".join(os.pread(fh.fileno(), f["row_bytes"], int(r) * f["row_stride"])
                                         for r in rows), np.uint8).reshape(len(rows), f["row_bytes"])
        bad = np.flatnonzero(checksums.row_checksums(got, f["row_bytes"]) != np.asarray(sums[rows]))
        if bad.size:
            self.add(f["rel"], f"not this dataset's feature file: row {int(rows[bad[0]])} (and {bad.size - 1} more of "
                     f"{rows.size} sampled) differ from {CHECKSUM_FILE}; the file was replaced or is corrupt")

    # ---- listed files, their sizes and hashes; metadata.sha256 ---------------------------------
    def files(self):
        listed = self.meta["files"]
        feature_rel = self.features["rel"] if self.features else (self.meta["features"].get("file"))
        for rel, info in sorted(listed.items()):
            p = self.root / rel
            if not isinstance(info, dict):
                self.add(M, f"field files.{rel}: expected {{'bytes', 'sha256'}}, found {info!r:.60}")
                continue
            if not p.is_file():
                if rel not in {a[0] for a in self.arrays()} | {feature_rel}:  # reported by headers(), features
                    self.add(rel, "missing (listed in metadata.json)")
                continue
            size = p.stat().st_size
            if size != info.get("bytes"):
                self.add(rel, f"size: expected {info.get('bytes')} bytes, found {size}")
                continue
            if rel == feature_rel:
                continue  # hashed in feature_values(), in the same pass as the value checks
            if sha256_file(p) != info.get("sha256"):
                self.add(rel, "sha256 differs from metadata.json (file changed or corrupt)")
        for p in sorted(self.root.rglob("*")):
            rel = p.relative_to(self.root).as_posix()
            if DERIVED_DIR.fullmatch(rel.split("/", 1)[0]):
                continue
            if p.is_file() and rel not in (M, METADATA_HASH_FILE) and rel not in listed:
                self.add(rel, "not listed in metadata.json (left over from an interrupted write?)")
        hp = self.root / METADATA_HASH_FILE
        if not hp.is_file():
            self.add(METADATA_HASH_FILE, f"missing: metadata.json is covered by no checksum (an older dataset; "
                     f"{UPGRADE})", "warning")
        else:
            words = hp.read_text(errors="replace").split()
            want = words[0] if words else ""
            got = hashlib.sha256(self.raw).hexdigest()
            if want != got:
                self.add(M, f"sha256 differs from {METADATA_HASH_FILE} (metadata.json was edited or is corrupt) "
                         f"(expected {want[:16]}..., found {got[:16]}...)")

    # ---- every value of the small arrays -------------------------------------------------------
    def _array(self, rel: str):
        return np.load(self.root / rel, mmap_mode="r") if rel in self.headers_ok else None

    def values(self):
        for et, (s, d, ne) in sorted(self.edges.items()):
            base = f"topology/{et}"
            degs = {}
            for kind, n_minor in (("csc", self.counts[s]), ("csr", self.counts[d])):
                indptr, indices = self._array(f"{base}/{kind}_indptr.npy"), self._array(f"{base}/{kind}_indices.npy")
                if indptr is not None:
                    found = indptr_problems(f"{base}/{kind}_indptr.npy", indptr, ne)
                    self.problems += found
                    if not found:
                        degs[f"{kind}_major"] = np.diff(indptr)
                if indices is not None:
                    found = index_range_problems(f"{base}/{kind}_indices.npy", indices, n_minor)
                    self.problems += found
                    if not found:
                        counts = np.zeros(n_minor, dtype=np.int64)
                        for start in range(0, indices.size, CHECK_CHUNK):
                            counts += np.bincount(np.asarray(indices[start: start + CHECK_CHUNK]), minlength=n_minor)
                        degs[f"{kind}_minor"] = counts
            # CSC and CSR must describe the same edges: in-degrees and out-degrees agree
            for major, minor, rel in (("csc_major", "csr_minor", f"{base}/csr_indices.npy"),
                                      ("csr_major", "csc_minor", f"{base}/csc_indices.npy")):
                if major in degs and minor in degs and not np.array_equal(degs[major], degs[minor]):
                    bad = int(np.flatnonzero(degs[major] != degs[minor])[0])
                    self.add(rel, f"disagrees with the other orientation: node {bad} has degree "
                             f"{degs[major][bad]} there and {degs[minor][bad]} here")
        labels = None
        lab = self.meta["labels"]
        if self.label_type is not None and _is_count(lab.get("num_classes"), 1):
            rel = f"labels/{self.label_type}.npy"
            labels = self._array(rel)
            if labels is not None:
                labels = np.asarray(labels)
                self.problems += label_problems(rel, labels, lab["num_classes"], lab.get("num_labeled"))
        if self.label_type is not None:
            self._split_values(self.counts[self.label_type], labels)
        for t, n in self.counts.items():
            deg = self._array(f"static/{t}.degree.npy")
            if deg is not None and n and np.asarray(deg).min() < 0:
                self.add(f"static/{t}.degree.npy", "negative degree (expected >= 0)")

    def _split_values(self, n: int, labels):
        seen = np.zeros(n, dtype=bool)
        for name in SPLITS:
            rel = f"splits/{name}.npy"
            arr = self._array(rel)
            if arr is None:
                continue
            arr = np.asarray(arr)
            found = split_range_problems(rel, arr, n)
            if found:
                self.problems += found
                continue
            if np.unique(arr).size != arr.size:
                self.add(rel, "contains duplicate ids")
            if seen[arr].any():
                self.add(rel, f"{int(seen[arr].sum())} ids also appear in an earlier split")
            seen[arr] = True
            # MAG240M's test labels are hidden: its writer names such splits in the metadata
            if labels is not None and name not in self.meta.get("splits_unlabelled_ok", ()) \
                    and (labels[arr] < 0).any():
                self.add(rel, f"{int((labels[arr] < 0).sum())} ids are unlabelled (label -1)")

    # ---- one pass over features.bin ------------------------------------------------------------
    def feature_values(self):
        f = self.features
        if self.level == "open" or f is None:
            return
        from tqdm import tqdm

        full = self.level == "full"
        rel, rows, stride, row_bytes, dtype = f["rel"], f["num_rows"], f["row_stride"], f["row_bytes"], f["dtype"]
        sums = checksums.load(self.root / CHECKSUM_FILE) if CHECKSUM_FILE in self.headers_ok else None
        if not full and sums is None:
            return  # an older dataset without checksums: a quick check has nothing cheap to compare rows with
        h = hashlib.sha256()
        per = max(1, HASH_CHUNK // stride)
        nonfinite = bad_pad = bad_sums = 0
        first_bad = first_sum = None
        with open(f["path"], "rb") as fh, tqdm(total=rows, unit="rows", desc="verify features",
                                              disable=not self.progress) as bar:
            for start in range(0, rows, per):
                k = min(per, rows - start)
                buf = fh.read(k * stride)
                if len(buf) < k * stride:
                    break  # a short file: its size is reported by files()
                raw = np.frombuffer(buf, dtype=np.uint8).reshape(k, stride)
                if full:
                    h.update(buf)
                    vals = raw[:, :row_bytes].copy().view(dtype) if stride != row_bytes else raw.view(dtype)
                    bad = ~np.isfinite(vals)
                    if bad.any():
                        nonfinite += int(bad.sum())
                        if first_bad is None:
                            first_bad = start + int(np.flatnonzero(bad.any(axis=1))[0])
                    if stride != row_bytes and raw[:, row_bytes:].any():
                        bad_pad += 1
                if sums is not None:
                    differ = np.flatnonzero(checksums.row_checksums(raw, row_bytes) != sums[start: start + k])
                    if differ.size:
                        bad_sums += differ.size
                        if first_sum is None:
                            first_sum = start + int(differ[0])
                bar.update(k)
            tail = fh.read() if full else b""
            h.update(tail)
        if nonfinite:
            self.add(rel, f"{nonfinite} non-finite values (first in row {first_bad})")
        if bad_pad or any(tail):
            self.add(rel, "padding bytes are not zero")
        if bad_sums:
            self.add(rel, f"{bad_sums} rows differ from their {checksums.ALGORITHM} checksums in {CHECKSUM_FILE} "
                     f"(first: row {first_sum})")
        listed = self.meta["files"].get(rel)
        if full and isinstance(listed, dict) and h.hexdigest() != listed.get("sha256"):
            self.add(rel, "sha256 differs from metadata.json (file changed or corrupt)")


def check(root: str | os.PathLike, level: str = "open", progress: bool = False) -> list[Problem]:
    """Every problem of the dataset at `root` at `level` (open, quick or full), in the order found."""
    return Checker(root, level, progress).run()
