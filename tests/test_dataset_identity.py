"""A dataset's files carry one identity (metadata.json features.checksums.identity), checked when
the dataset is opened: a feature file and its checksum file swapped in together from another
dataset of the same shape are refused on open, not only by `dataset verify`."""

from __future__ import annotations

import json
import shutil

import pytest

from lsm_gnn.datasets.checksums import identity, load
from lsm_gnn.datasets.format import CHECKSUM_FILE, FEATURE_FILE, Dataset
from lsm_gnn.utils.errors import DataError


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    from lsm_gnn.datasets.synthetic import generate

    root = tmp_path_factory.mktemp("ident")
    generate(root / "a", "300", feature_dim=8, seed=1, progress=False)
    generate(root / "b", "300", feature_dim=8, seed=2, progress=False)
    return root / "a", root / "b"


def test_a_written_dataset_carries_the_identity_of_its_checksums(two):
    a, _ = two
    meta = json.loads((a / "metadata.json").read_text())
    assert meta["features"]["checksums"]["identity"] == identity(load(a / CHECKSUM_FILE))
    Dataset(a)


def test_features_and_checksums_from_another_dataset_are_refused_on_open(two, tmp_path):
    a, b = two
    ds = tmp_path / "ds"
    shutil.copytree(a, ds)
    for f in (FEATURE_FILE, CHECKSUM_FILE):
        shutil.copyfile(b / f, ds / f)
    with pytest.raises(DataError, match="not this dataset's checksums") as e:
        Dataset(ds)
    assert CHECKSUM_FILE in str(e.value)


def test_a_feature_file_from_another_dataset_is_refused_on_open(two, tmp_path):
    a, b = two
    ds = tmp_path / "ds"
    shutil.copytree(a, ds)
    shutil.copyfile(b / FEATURE_FILE, ds / FEATURE_FILE)
    with pytest.raises(DataError, match="not this dataset's feature file") as e:
        Dataset(ds)
    assert FEATURE_FILE in str(e.value)


def test_verify_names_the_foreign_files_too(two, tmp_path):
    from lsm_gnn.datasets.verify import errors, verify

    a, b = two
    ds = tmp_path / "ds"
    shutil.copytree(a, ds)
    for f in (FEATURE_FILE, CHECKSUM_FILE):
        shutil.copyfile(b / f, ds / f)
    assert any(p.file == CHECKSUM_FILE and "identity" in p.message for p in errors(verify(ds, quick=True)))


def test_a_dataset_written_before_identities_still_opens(two, tmp_path):
    a, _ = two
    ds = tmp_path / "ds"
    shutil.copytree(a, ds)
    meta = json.loads((ds / "metadata.json").read_text())
    del meta["features"]["checksums"]["identity"]
    (ds / "metadata.json").write_text(json.dumps(meta))
    Dataset(ds)
