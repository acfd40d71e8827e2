"""pyproject.toml holds the project; this file says the one thing its tables cannot: the CUDA
sources in the top-level cuda/ folder ship inside the package as `lsm_gnn.kernels` (a package whose
folder lies outside the tree that package discovery walks). lsm_gnn.utils.cuda_sources reads them."""

from setuptools import find_namespace_packages, setup

setup(packages=find_namespace_packages(include=["lsm_gnn", "lsm_gnn.*", "baselines", "baselines.*"],
                                       exclude=["*.__pycache__"]) + ["lsm_gnn.kernels"],
      package_dir={"lsm_gnn.kernels": "cuda"})
