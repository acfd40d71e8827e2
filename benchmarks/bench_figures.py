"""asv: the hardware-independent figures, tracked next to the timings.

Storage rows per policy, storage rows / Belady MIN at the same memory, and the 2-device shared /
isolated storage rows, on one recorded sampler trace of a seeded synthetic graph (120k papers,
fan-outs 10,15, batch 16, 800 iterations: about 13 cache rows per distinct row one iteration
requests at 10 % memory, the paper's regime; docs/workflow.md). These are counts of a deterministic
replay, so they are the same on every machine and every run: any change between two commits is a
change of behaviour (sampler, generator, budget split or policy), never noise.

`setup_cache` builds the graph and replays everything once per commit (about a minute); the
`track_` methods only look the figures up.
"""

import os
import tempfile

import numpy as np

N, DIM, BATCH, FANOUTS, ITERATIONS, FRACTION, WINDOW = 120_000, 4, 16, (10, 15), 800, 0.10, 8
try:  # every configurable policy of the registry
    from lsm_gnn.bench.cache import POLICY_NAMES  # noqa: E402
except ModuleNotFoundError:  # a commit before lsm_gnn/bench/ (asv runs this suite against older builds)
    from lsm_gnn.cache.bench import POLICY_NAMES  # noqa: E402

POLICIES = list(POLICY_NAMES)


def _figures(root: str) -> dict:
    from lsm_gnn.config import CacheConfig
    from lsm_gnn.datasets.synthetic import generate
    from lsm_gnn.sim.generate import generate_trace
    from lsm_gnn.sim.simulate import simulate

    ds = generate(os.path.join(root, "graph"), N, seed=0, feature_dim=DIM, progress=False)
    static = np.asarray(ds.static_scores())
    row_bytes = ds.features().row_bytes
    out = {"policy": {}, "multi": {}}
    one = generate_trace(ds, fanouts=FANOUTS, batch_size=BATCH, seed=0, max_batches=ITERATIONS, progress=False)
    configs = [CacheConfig(policy=p, window=WINDOW, capacity_fraction=FRACTION) for p in POLICIES]
    df = simulate(one, configs, static_scores=static, row_bytes=row_bytes)
    for _, r in df.iterrows():
        out["policy"][r["policy"]] = {
            "storage_rows": int(r["storage_rows"]), "storage_rows_vs_min": float(r["storage_rows_vs_min"]),
            "regime": float(r["capacity_rows"]) * int(r["devices"]) * int(r["batches"]) / float(r["distinct"])}
    two = generate_trace(ds, fanouts=FANOUTS, batch_size=BATCH, seed=0, devices=2, max_batches=ITERATIONS // 2,
                         progress=False)
    for policy in ("hybrid", "lru"):
        rows = {}
        for mode in ("shared", "isolated"):
            d = simulate(two, [CacheConfig(policy=policy, window=WINDOW, capacity_fraction=FRACTION)],
                         static_scores=static, mode=mode, row_bytes=row_bytes)
            rows[mode] = int(d["storage_rows"].iloc[0])
        out["multi"][policy] = rows["shared"] / rows["isolated"]
    return out


class Figures:
    """Counts of a deterministic replay: one run per commit is exact."""

    timeout = 600
    number = 1
    repeat = 1
    rounds = 1

    def setup_cache(self):
        with tempfile.TemporaryDirectory(prefix="asv-figures-") as tmp:
            return _figures(tmp)


class PolicyFigures(Figures):
    params = [POLICIES]
    param_names = ["policy"]

    def track_storage_rows(self, figures, policy):
        return figures["policy"][policy]["storage_rows"]

    track_storage_rows.unit = "rows"

    def track_storage_rows_vs_min(self, figures, policy):
        return figures["policy"][policy]["storage_rows_vs_min"]

    track_storage_rows_vs_min.unit = "storage rows / MIN"

    def track_cache_rows_per_iteration_rows(self, figures, policy):
        return figures["policy"][policy]["regime"]

    track_cache_rows_per_iteration_rows.unit = "cache rows / distinct rows per iteration"


class MultiDeviceFigures(Figures):
    params = [["hybrid", "lru"]]
    param_names = ["policy"]

    def track_shared_vs_isolated_storage_rows(self, figures, policy):
        return figures["multi"][policy]

    track_shared_vs_isolated_storage_rows.unit = "shared / isolated storage rows"
