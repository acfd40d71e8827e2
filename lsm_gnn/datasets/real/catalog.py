"""Where the real datasets live and what their files must look like, as data.

Every number here comes from the datasets' public sources:
github.com/IllinoisGraphBenchmark/IGB-Datasets (README, igb/download.py; arXiv 2302.13522), the OGB
pages of ogbn-papers100M and MAG240M (ogb.stanford.edu) and the `ogb` package
(github.com/snap-stanford/ogb); per-type IGBH counts as in DGL's
examples/graphbolt/rgcn/download.py. Node counts are used to check the byte size of headerless
downloads (large/full IGB arrays have no checksum and no header); edge counts are *never* taken
from here: preparation reads them from the files (IGB-full's cites file is known to differ from the
published figure). Tests replace entries of these tables (monkeypatch) to describe their tiny
fixtures.

`base_url` of a release is the directory that holds its files; `download(..., base_url=...)`
swaps it for a mirror that keeps the same relative paths.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lsm_gnn.utils.errors import InputError

NAMES = ("igb", "igbh", "ogbn-papers100M", "mag240m")
IGB_SIZES = ("tiny", "small", "medium", "large", "full")
IGB_DIM = 1024

IGB_AWSOPEN = "https://igb-public-awsopen.s3.amazonaws.com"
BASE_URLS = {
    ("igb", "tarball"): f"{IGB_AWSOPEN}/igb-homogeneous",
    ("igbh", "tarball"): f"{IGB_AWSOPEN}/igb-heterogeneous",
    ("igb", "large"): f"{IGB_AWSOPEN}/igb_large/processed",
    ("igbh", "large"): f"{IGB_AWSOPEN}/igb_large/processed",
    ("igb", "full"): f"{IGB_AWSOPEN}/IGBH/processed",     # IGB260M = paper + cites of IGBH-full
    ("igbh", "full"): f"{IGB_AWSOPEN}/IGBH/processed",
    ("ogbn-papers100M", None): "http://snap.stanford.edu/ogb/data/nodeproppred",
    ("mag240m", None): "https://dgl-data.s3-accelerate.amazonaws.com/dataset/OGB-LSC",
}

# igb/download.py of IllinoisGraphBenchmark/IGB-Datasets
IGB_TARBALL_MD5 = {
    ("igb", "tiny"): "34856534da55419b316d620e2d5b21be",
    ("igb", "small"): "6781c699723529902ace0a95cafe6fe4",
    ("igb", "medium"): "4640df4ceee46851fd18c0a44ddcc622",
    ("igbh", "tiny"): "83fbc1091497ff92cf20afe82fae0ade",
    ("igbh", "small"): "2f42077be60a074aec24f7c60089e1bd",
    ("igbh", "medium"): "7f0df4296eca36553ff3a6a63abbd347",
}

# Node counts per size and type (NVIDIA MLPerf NODE_COUNTS; GLT and DGL GraphBolt agree).
IGB_NODE_COUNTS = {
    "tiny": {"paper": 100_000, "author": 357_041, "institute": 8_738, "fos": 84_220,
             "journal": 8_101, "conference": 398},
    "small": {"paper": 1_000_000, "author": 1_926_066, "institute": 14_751, "fos": 190_449,
              "journal": 15_277, "conference": 1_215},
    "medium": {"paper": 10_000_000, "author": 15_544_654, "institute": 23_256, "fos": 415_054,
               "journal": 37_565, "conference": 4_189},
    "large": {"paper": 100_000_000, "author": 116_959_896, "institute": 26_524, "fos": 649_707,
              "journal": 48_820, "conference": 4_490},
    "full": {"paper": 269_346_174, "author": 277_220_883, "institute": 26_918, "fos": 712_960,
             "journal": 49_052, "conference": 4_547},
}
# IGB-full: only the first papers carry labels (19-class and 2K-class label sets).
IGB_FULL_LABELED = {"19": 227_130_858, "2K": 157_675_969}
IGB_NUM_CLASSES = {"19": 19, "2K": 2983}
# Rows N-4,957,567..N-1 of IGB-full paper features, missing from downloads made before 7 Nov 2023.
IGB_FULL_TAIL_ROWS = 4_957_567

# Featured node types in feature-row order (GIDS: paper, author, fos, institute) and relations
# as (src, relation, dst) = the directory <src>__<relation>__<dst>, edges stored (E, 2).
IGBH_TYPE_ORDER = ("paper", "author", "fos", "institute", "journal", "conference")
IGBH_RELATIONS = (
    ("paper", "cites", "paper"),
    ("paper", "written_by", "author"),
    ("paper", "topic", "fos"),
    ("author", "affiliated_to", "institute"),
    ("paper", "published", "journal"),
    ("paper", "venue", "conference"),
)
# Files whose large/full versions are raw headerless float32 despite the .npy suffix.
IGB_RAW_TYPES = ("paper", "author")

PAPERS100M_NUM_CLASSES = 172
MAG240M_MD5 = "bd61c9446f557fbe4430d9a7ce108b34"


@dataclass(frozen=True)
class ArraySpec:
    """What a downloaded array file must hold: checked from its .npy header, or, for a
    headerless file, from its byte length (rows x row bytes)."""

    dtype: str
    row_shape: tuple = ()
    rows: int | None = None          # exact row count when known
    max_rows: int | None = None      # label files of IGB-full may be shorter than N
    raw_possible: bool = False       # the file may be a headerless memmap


@dataclass(frozen=True)
class RemoteFile:
    path: str                        # relative to the release's base URL
    dest: str                        # relative to the download directory
    md5: str | None = None
    size: int | None = None          # exact byte size when known in advance
    array: ArraySpec | None = None   # checked after download
    archive: str | None = None       # "tar.gz" | "zip": extracted after verification, then deleted


@dataclass(frozen=True)
class Release:
    name: str
    size: str | None
    base_url: str
    root: str                        # directory (relative to dest) that download() returns
    files: tuple[RemoteFile, ...] = field(default_factory=tuple)


def check_name_size(name: str, size: str | None) -> str | None:
    """Validate (name, size); returns the normalised size (None for the OGB datasets)."""
    if name not in NAMES:
        raise InputError(f"unknown dataset {name!r}; expected one of {', '.join(NAMES)}")
    if name in ("igb", "igbh"):
        if size not in IGB_SIZES:
            raise InputError(f"{name}: size must be one of {', '.join(IGB_SIZES)}, found {size!r}")
        return size
    if size not in (None, "full"):
        raise InputError(f"{name}: has a single size (pass size=None or 'full'), found {size!r}")
    return None


def _igb_array_files(name: str, size: str) -> tuple[RemoteFile, ...]:
    counts = IGB_NODE_COUNTS[size]
    feat_bytes = IGB_DIM * 4
    files = []
    types = ("paper",) if name == "igb" else IGBH_TYPE_ORDER
    for t in types:
        raw = t in IGB_RAW_TYPES
        files.append(RemoteFile(
            f"{t}/node_feat.npy", f"{size}/processed/{t}/node_feat.npy",
            size=counts[t] * feat_bytes if raw else None,
            # with a header the file states its own row count (counts of journal/conference come
            # from a single source, so they are not enforced); headerless ones must match exactly
            array=ArraySpec("float32", (IGB_DIM,), rows=counts[t] if raw else None, raw_possible=raw)))
    n = counts["paper"]
    for label_set in ("19", "2K"):
        # full: the label files' length differs between releases (N or the labelled prefix)
        spec = (ArraySpec("float32", (), max_rows=n, raw_possible=True) if size == "full"
                else ArraySpec("float32", (), rows=n, raw_possible=True))
        files.append(RemoteFile(f"paper/node_label_{label_set}.npy",
                                f"{size}/processed/paper/node_label_{label_set}.npy",
                                size=n * 4 if size != "full" else None, array=spec))
    rels = IGBH_RELATIONS[:1] if name == "igb" else IGBH_RELATIONS
    for s, r, d in rels:
        rel = f"{s}__{r}__{d}"
        files.append(RemoteFile(f"{rel}/edge_index.npy", f"{size}/processed/{rel}/edge_index.npy",
                                array=ArraySpec("int64", (2,))))
    return tuple(files)


def release(name: str, size: str | None = None) -> Release:
    """The catalog entry of one dataset (and size)."""
    size = check_name_size(name, size)
    if name in ("igb", "igbh"):
        if size in ("tiny", "small", "medium"):
            kind = "homogeneous" if name == "igb" else "heterogeneous"
            fname = f"igb_{kind}_{size}.tar.gz"
            return Release(name, size, BASE_URLS[(name, "tarball")], size,
                           (RemoteFile(fname, fname, md5=IGB_TARBALL_MD5[(name, size)], archive="tar.gz"),))
        return Release(name, size, BASE_URLS[(name, size)], size, _igb_array_files(name, size))
    if name == "ogbn-papers100M":
        # No checksum or size is published: the server's Content-Length and the zip CRCs check it.
        return Release(name, None, BASE_URLS[(name, None)], "papers100M-bin",
                       (RemoteFile("papers100M-bin.zip", "papers100M-bin.zip", archive="zip"),))
    return Release(name, None, BASE_URLS[(name, None)], "mag240m_kddcup2021",
                   (RemoteFile("mag240m_kddcup2021.zip", "mag240m_kddcup2021.zip", md5=MAG240M_MD5,
                               archive="zip"),))
