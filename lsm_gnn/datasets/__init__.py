"""Datasets in one on-disk format (docs/dataset-format.md): synthetic generator, real-dataset
download and preparation, verification."""

from lsm_gnn.datasets.format import Dataset, DatasetWriter, FeatureLayout  # noqa: F401
