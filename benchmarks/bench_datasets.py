"""asv: the dataset layer. Topology generation and PageRank at 100k nodes (the tiny graph's
topology). A whole generation and verification write and read files: timed by the tests and
`lsm-gnn dataset`, not here (docs/benchmarks.md)."""

import numpy as np

from lsm_gnn.datasets.pagerank import csc_from_edges, pagerank, percentile_byte
from lsm_gnn.datasets.synthetic import community_graph

from ._timing import Timed


class TopologySuite(Timed):
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
