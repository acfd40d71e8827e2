"""Check a dataset directory against its metadata.json; every problem names its file.

`verify(root)` never raises for a bad dataset: it returns the list of `Problem`s (empty when the
dataset is sound; a problem of severity "warning" leaves it usable). The rules are those of the
one checker (`lsm_gnn.datasets.checks`, level "quick" or "full"), the same that `Dataset` applies
on open: presence, byte size and sha256 of every listed file (`quick` skips features.bin's
sha256, non-finite scan and padding check; it still checks every row against its xxh3 checksum), metadata.json against metadata.sha256, unlisted files,
.npy dtypes and shapes, CSC/CSR indptr (starts at 0, monotone, ends at the edge count) and index
ranges, CSC and CSR agreeing on every degree, the feature layout and dtype (row stride, block
padding, type offsets; row checksums; non-finite values unless `quick`), label range and count,
split sizes, ranges, overlaps and labelled-ness, and the static scores.
"""

from __future__ import annotations

import os

from lsm_gnn.datasets.checks import Problem, check  # noqa: F401  (Problem: the result type)


def verify(root: str | os.PathLike, quick: bool = False, progress: bool = False) -> list[Problem]:
    """All problems found in the dataset at `root` (empty list: sound). `quick` skips features.bin's
    sha256, non-finite scan and padding check (its size and every row's xxh3 checksum are still
    checked: one read of the file)."""
    problems = check(root, "quick" if quick else "full", progress)
    # one problem per (file, message), in file order
    return sorted(dict.fromkeys(problems), key=lambda p: p.file)


def errors(problems: list[Problem]) -> list[Problem]:
    """The problems that make a dataset unusable (warnings left out)."""
    return [p for p in problems if p.severity == "error"]


def write_checksums(root: str | os.PathLike, progress: bool = False) -> list[Problem]:
    """Upgrade an older dataset: add the row checksums (features.xxh3.npy) and metadata.sha256.

    A full check runs first and the upgrade happens only when it finds no error (checksums
    computed over a corrupt file would vouch for it); returns the errors that stopped it (empty:
    upgraded, or nothing to add). Each file is written atomically; metadata.json last but one and
    metadata.sha256 last."""
    import json
    from pathlib import Path

    from lsm_gnn.datasets import checksums
    from lsm_gnn.datasets.spec import CHECKSUM_FILE, METADATA_FILE, METADATA_HASH_FILE, sha256_file, sha256_line
    from lsm_gnn.utils.atomic import write_text

    root = Path(root)
    found = errors(verify(root, quick=False, progress=progress))
    if found:
        return found
    meta = json.loads((root / METADATA_FILE).read_text())
    f = meta["features"]
    if not f.get("checksums"):
        sums = checksums.file_checksums(root / f["file"], f["num_rows"], f["row_stride"], f["row_bytes"], progress)
        checksums.save(root / CHECKSUM_FILE, sums)
        f["checksums"] = {"file": CHECKSUM_FILE, "algorithm": checksums.ALGORITHM, "unit": "row",
                          "identity": checksums.identity(sums)}
        p = root / CHECKSUM_FILE
        meta["files"][CHECKSUM_FILE] = {"bytes": p.stat().st_size, "sha256": sha256_file(p)}
        text = json.dumps(meta, indent=2) + "\n"
        write_text(root / METADATA_FILE, text)
    write_text(root / METADATA_HASH_FILE, sha256_line((root / METADATA_FILE).read_bytes()))
    return []
