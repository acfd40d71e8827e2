"""lsm_gnn.accelerator.measure: the real train step timed on a device (here the CPU, small), the
step model fitted to it, and a profile written that load_accelerator reads back."""

from __future__ import annotations

import pytest

from lsm_gnn.accelerator import load_accelerator
from lsm_gnn.models.blocks import batch_edges
from lsm_gnn.accelerator.measure import layer_sizes, measure_step, reference_model, synthetic_blocks
from lsm_gnn.utils.errors import ConfigError


def test_the_shapes_come_out_at_the_reference_batch_and_rows_grow_slower_than_edges():
    ref = load_accelerator("h200").reference
    sizes = layer_sizes(1024)
    assert sizes[0] == ref.input_rows and sizes[2] == 1024
    blocks = synthetic_blocks(1024)
    assert blocks[0].num_src == ref.input_rows and abs(batch_edges(blocks) - ref.edges) <= 10
    assert [b.num_dst for b in blocks] == sizes[1:] and blocks[1].num_src == sizes[1]
    ratios = []
    for b in (128, 256, 512, 1024):
        blocks = synthetic_blocks(b)
        ratios.append(blocks[0].num_src / batch_edges(blocks))
        for blk in blocks:  # edges sorted by destination, sources within range
            assert bool((blk.dst[1:] >= blk.dst[:-1]).all()) and int(blk.src.max()) < blk.num_src
    assert ratios == sorted(ratios, reverse=True) and ratios[0] > 2 * ratios[-1]


def test_the_reference_model_is_the_run_configs_graphsage():
    cfg, model = reference_model()
    assert cfg.name == "sage" and cfg.hidden == 256 and type(model).__name__ == "SAGE"
    assert model.layers[0].fc_self.in_features == 1024 and model.layers[-1].fc_self.out_features == 19


def test_measure_on_the_cpu_writes_a_profile_that_loads(tmp_path):
    res = measure_step("cpu", (4, 8, 16), hidden=8, feature_dim=16, warmup=1, repeats=2, out_dir=tmp_path,
                       name="cpu-test")
    assert [p["batch_size"] for p in res["points"]] == [4, 8, 16]
    for p in res["points"]:
        n0, n1, b = layer_sizes(p["batch_size"])
        assert p["seconds"] > 0 and len(p["repeats_s"]) == 2
        assert (p["input_rows"], p["edges"]) == (n0, b * 15 + n1 * 10)
    prof = load_accelerator(res["profile_path"])
    assert prof.name == "cpu-test" and prof.measured is True
    assert prof.step.model_dump() == pytest.approx(res["step"])
    big = res["points"][-1]
    assert (prof.reference.input_rows, prof.reference.edges) == (big["input_rows"], big["edges"])
    with pytest.raises(ConfigError, match="measured"):
        (tmp_path / "bad.yaml").write_text(open(res["profile_path"]).read().replace("measured: true", "measured: maybe"))
        load_accelerator(tmp_path / "bad.yaml")
