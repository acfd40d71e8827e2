"""asv: the dataset layer. Topology generation and PageRank at 100k nodes (the tiny graph's
topology), a whole small generation (20k nodes x 256-dim features), and verification."""

import shutil
import tempfile

import numpy as np

from lsm_gnn.datasets.pagerank import csc_from_edges, pagerank, percentile_byte
from lsm_gnn.datasets.synthetic import community_graph, generate
from lsm_gnn.datasets.verify import verify


class TopologySuite:
    timeout = 120

    def setup(self):
        self.lo, self.hi, _ = community_graph(100_000, np.random.default_rng(0))
        n = 100_000
        src, dst = np.concatenate((self.lo, self.hi)), np.concatenate((self.hi, self.lo))
        self.csc = csc_from_edges(src, dst, n)
        pagerank(*self.csc, iterations=1)  # compile outside the timed region

    def time_community_graph_100k(self):
        community_graph(100_000, np.random.default_rng(0))

    def time_pagerank_100k(self):
        percentile_byte(pagerank(*self.csc))


class GenerateSuite:
    timeout = 120

    def setup(self):
        self.tmp = tempfile.mkdtemp(prefix="asv-datasets-")
        self.ds = generate(f"{self.tmp}/base", 20_000, feature_dim=256, progress=False)

    def teardown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def time_generate_20k_256d(self):
        generate(f"{self.tmp}/again", 20_000, feature_dim=256, overwrite=True, progress=False)

    def time_verify_full(self):
        verify(self.ds.root)

    def time_verify_quick(self):
        verify(self.ds.root, quick=True)
