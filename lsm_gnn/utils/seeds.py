"""The seed of each repeated run (MLPerf Storage draws a new seed per run), in one place: `lsm-gnn
bench compare` (lsm_gnn/bench/compare.py), `bench storage`'s rounds and the workflow's chains of
repeated runs (workflow/rules/common.smk) all call `run_seed`."""

from __future__ import annotations

SEED_MAX = 2**32 - 1
"""The largest seed every generator here takes (numpy's RandomState and torch.manual_seed: 0..2**32-1)."""


def run_seed(base: int, index: int) -> int:
    """The seed of run `index` of a comparison whose base seed is `base`: independent draws that the
    base seed reproduces. Every system's run of one round gets the same seed, so a round compares
    the systems on the same batches."""
    import numpy as np

    return int(np.random.SeedSequence([int(base), int(index)]).generate_state(1)[0])
