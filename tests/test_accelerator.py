"""lsm_gnn.accelerator: the one step-time model, its profiles, the waiting accelerator, the fit."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from lsm_gnn.accelerator import (PACKAGED, EmulatedAccelerator, StepModel, fit_step_model, load_accelerator,
                                 utilisation)
from lsm_gnn.models import Block
from lsm_gnn.models.blocks import batch_edges
from lsm_gnn.utils.errors import ConfigError


def test_the_step_is_a_fixed_part_plus_a_part_per_input_row_and_per_edge():
    m = StepModel(fixed_s=0.008, row_s=1e-7, edge_s=1e-8)
    assert m.seconds(0, 0) == pytest.approx(0.008)
    assert m.seconds(10_000, 50_000) == pytest.approx(0.008 + 0.001 + 0.0005)
    assert m.scaled(4).seconds(10_000, 50_000) == pytest.approx(4 * 0.0095)


@pytest.mark.parametrize("name", PACKAGED)
def test_every_packaged_profile_loads_and_its_reference_batch_agrees_with_its_constants(name):
    p = load_accelerator(name)
    assert p.name == name and p.memory_bandwidth and not p.measured
    assert p.step.seconds(p.reference.input_rows, p.reference.edges) == pytest.approx(p.reference.step_s, rel=0.01)


def test_a_profile_whose_reference_step_disagrees_with_its_model_names_the_field(tmp_path):
    data = yaml.safe_load(open(load_accelerator.__globals__["PROFILE_DIR"] / "a100.yaml"))
    data["reference"]["step_s"] = 0.05
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=r"bad.yaml: reference.step_s: the step model gives 0.00505298 s for the reference batch"):
        load_accelerator(path)
    data["step"]["fixed_s"] = -1
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=r"step.fixed_s"):
        load_accelerator(path)
    with pytest.raises(ConfigError, match="no such accelerator profile file; packaged accelerator profiles: a100, h200"):
        load_accelerator("v100")


@pytest.mark.parametrize("name, flops, bandwidth", [("a100", 19.5e12, 1.555e12), ("h200", 67e12, 4.8e12)])
def test_each_packaged_constant_is_its_stated_inputs_arithmetic(name, flops, bandwidth):
    """From the datasheet figures the profile quotes: the edge term divides the bytes by the achieved
    share of the peak bandwidth (0.9 of peak takes longer than peak), the row term is the FLOP over the
    peak, the fixed term the launched operators times the host time of one."""
    p = load_accelerator(name)
    b = p.basis
    assert p.memory_bandwidth == bandwidth and b.peak_flops == flops and b.achieved_bandwidth == 0.9
    assert b.bytes_per_edge == 3 * 4096
    assert p.step.edge_s == pytest.approx(3 * 4096 / (0.9 * bandwidth), rel=1e-3)
    assert p.step.edge_s > 3 * 4096 / bandwidth  # slower than at peak
    assert p.step.row_s == pytest.approx(15_400 * 2 * 1024 * 256 * 2 * 3 / 42_730 / flops, rel=1e-3)
    assert p.step.fixed_s == pytest.approx(b.host_ops_per_step * b.host_s_per_op, rel=1e-3)


def test_a_profile_whose_constants_disagree_with_its_basis_is_refused_naming_the_constant(tmp_path):
    data = yaml.safe_load(open(load_accelerator.__globals__["PROFILE_DIR"] / "a100.yaml"))
    data["step"]["edge_s"] = 3 * 4096 / 1.555e12 * 0.9   # the old arithmetic: x 0.9 where it divides
    data["reference"]["step_s"] = None
    path = tmp_path / "times.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=r"times.yaml: step.edge_s: the profile states 7.11\d+e-09 s, its basis gives "
                                          r"8.78\d+e-09 s"):
        load_accelerator(path)


def test_the_host_operators_of_a_step_are_what_the_profiles_state():
    from lsm_gnn.accelerator.measure import count_host_ops

    counts = count_host_ops(batch_size=16)
    assert counts["total"] == sum(v for k, v in counts.items() if k != "total")
    assert counts["optimizer"] > 0 and counts["backward"] > 0 and counts["readback"] == 1
    for name in PACKAGED:
        assert load_accelerator(name).basis.host_ops_per_step == pytest.approx(counts["total"], rel=0.1)


def test_batch_edges_counts_every_relation_of_every_block():
    b1 = Block.homogeneous(5, 2, [0, 1, 2], [0, 0, 1])
    b2 = Block.homogeneous(2, 1, [0, 1], [0, 0])
    assert batch_edges([b1, b2]) == 5

    class DglLike:  # what a DGL block answers
        def num_edges(self):
            return 7

    assert batch_edges([DglLike(), b2]) == 9


class FakeClock:
    """time.sleep that wakes `late` seconds after its deadline, on a clock that only sleeps move."""

    def __init__(self, late):
        self.now, self.late, self.slept = 0.0, late, []

    def perf_counter(self):
        return self.now

    def sleep(self, t):
        self.slept.append(t)
        self.now += t + self.late


def test_late_wake_ups_are_taken_off_the_next_waits_so_the_run_keeps_the_models_total(monkeypatch):
    import lsm_gnn.accelerator as acc

    one = load_accelerator("a100").step.seconds(6000, 20000)
    late = one / 4
    clock = FakeClock(late=late)
    monkeypatch.setattr(acc.time, "perf_counter", clock.perf_counter)
    monkeypatch.setattr(acc.time, "sleep", clock.sleep)
    a = EmulatedAccelerator(load_accelerator("a100"))
    steps = [a.step(6000, 20000) for _ in range(50)]
    assert steps == [pytest.approx(one)] * 50 and a.busy_s == pytest.approx(50 * one)
    # the clock moved by the model's total plus only the last wake-up's lateness
    assert clock.now == pytest.approx(50 * one + late)
    assert a.overshoot_s == pytest.approx(late)
    assert clock.slept[1] == pytest.approx(one - late)


def test_a_slower_accelerator_waits_its_multiple_and_the_record_says_so(monkeypatch):
    import lsm_gnn.accelerator as acc

    clock = FakeClock(late=0.0)
    monkeypatch.setattr(acc.time, "perf_counter", clock.perf_counter)
    monkeypatch.setattr(acc.time, "sleep", clock.sleep)
    a = EmulatedAccelerator(load_accelerator("h200"), scale=3.0)
    a.step(1000, 0)
    assert clock.now == pytest.approx(3 * load_accelerator("h200").step.seconds(1000, 0))
    rec = a.record()
    assert rec["mode"] == "emulated" and rec["profile"] == "h200" and rec["scale"] == 3.0
    assert rec["step"]["fixed_s"] == pytest.approx(3 * load_accelerator("h200").step.fixed_s)


def test_au_is_busy_time_over_wall_time():
    assert utilisation(0.9, 1.0) == pytest.approx(0.9)
    assert utilisation(1.0, 0.0) is None


def test_the_fit_recovers_the_constants_of_measured_steps_and_holds_a_negative_one_at_zero():
    truth = StepModel(fixed_s=0.004, row_s=5e-8, edge_s=3e-9)
    rows = [6000, 12000, 24000, 43000, 9000]
    edges = [20000, 45000, 90000, 170000, 60000]
    m = fit_step_model(rows, edges, [truth.seconds(r, e) for r, e in zip(rows, edges)])
    assert m.fixed_s == pytest.approx(0.004, rel=1e-6) and m.row_s == pytest.approx(5e-8, rel=1e-6)
    assert m.edge_s == pytest.approx(3e-9, rel=1e-6)
    # steps that shrink with the edges: no negative constant, the other two refitted alone
    rows, edges = [1000, 2000, 3000, 4000], [4000, 1000, 3500, 500]
    secs = [0.01 + 1e-6 * r - 1e-8 * e for r, e in zip(rows, edges)]
    m = fit_step_model(rows, edges, secs)
    (fixed, row), *_ = np.linalg.lstsq(np.column_stack([np.ones(4), rows]), secs, rcond=None)
    assert m.edge_s == 0.0 and m.row_s == pytest.approx(row) and m.fixed_s == pytest.approx(fixed)
