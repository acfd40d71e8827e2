"""Emulated accelerators: the train step of a batch replaced by a wait of a GPU's step time.

After MLPerf Storage (github.com/mlcommons/storage, Submission_guidelines.md) and its engine DLIO
(github.com/argonne-lcf/dlio_benchmark; Devarajan et al., CCGrid 2021): on a machine without GPUs the
accelerator's work on one batch is a `sleep()` of the time that batch takes on the GPU, and the rest
of the data pipeline runs unchanged. So the data plane (sampling, lookahead, cache, victim buffer,
exchange, storage reads, KVStore pulls) is measured as it would feed that GPU, and the CPU cores
are left to it as a GPU would leave them.

One step-time model, used by the emulation here and by the projection (lsm_gnn.project):

    step(R, E) = fixed_s + row_s x R + edge_s x E       R input rows, E edges of the batch's blocks

Accelerator utilisation (AU, MLPerf Storage's metric) = the emulated accelerator's busy time over
the wall time of the timed window; MLPerf Storage counts a run only at AU >= 90 % for its image
workloads. Profiles (`profiles/<name>.yaml`: a100, h200) give each constant its public source or mark
it as an assumption with its basis; `lsm-gnn check gpu` measures the real step on a GPU so that an
assumption can be replaced by a measurement (`fit_step_model`).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from lsm_gnn.choices import ACCELERATOR_PROFILES as PACKAGED  # the one list, which the config reads too

PROFILE_DIR = Path(__file__).resolve().parent / "profiles"
AU_TARGET = 0.90
"""MLPerf Storage's minimum accelerator utilisation for a run to count (3D U-Net, ResNet-50)."""


class _S(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StepModel(_S):
    """The time of one train step (forward, backward, optimiser) of one worker on its accelerator.

    DDP's gradient all-reduce is not in it: waiting for the peers is the record's `sync` stage
    (lsm_gnn.metrics.STAGES), the projection's `allreduce` stage."""

    fixed_s: float = Field(0.0, ge=0)
    """What every step pays whatever its size (kernel launches, optimiser, framework)."""
    row_s: float = Field(0.0, ge=0)
    """Per input row of the batch (the dense layers' work grows with the sampled nodes)."""
    edge_s: float = Field(0.0, ge=0)
    """Per edge of the batch's blocks (the aggregation gathers one source row per edge)."""

    def seconds(self, rows: float, edges: float) -> float:
        return self.fixed_s + self.row_s * rows + self.edge_s * edges

    def formula(self, rows: float, edges: float) -> str:
        return (f"{self.fixed_s:.4g} s + {self.row_s:.4g} s x R {rows:,.0f} + {self.edge_s:.4g} s x E {edges:,.0f}")

    def scaled(self, factor: float) -> "StepModel":
        """The same accelerator `factor` times slower (a sweep of the step time)."""
        return StepModel(fixed_s=self.fixed_s * factor, row_s=self.row_s * factor, edge_s=self.edge_s * factor)


class ReferenceBatch(_S):
    """The batch a profile's constants were derived or measured on (documentation and checks)."""

    description: str
    input_rows: int = Field(ge=1)
    edges: int = Field(ge=0)
    step_s: float | None = Field(None, gt=0)
    """The measured (or assumed) step time of this batch: step.seconds(input_rows, edges) agrees."""


class StepBasis(_S):
    """The inputs an unmeasured profile's three constants are computed from (`derive`): each one a
    public figure or an assumption, stated in the profile beside it. A measured profile has none:
    `lsm-gnn check gpu` fits the constants to real steps (fit_step_model)."""

    peak_flops: float = Field(gt=0)
    """FP32 FLOP/s of the device (its datasheet)."""
    flops_per_row: float = Field(gt=0)
    """Dense-layer FLOP (forward + backward) per input row of the batch."""
    bytes_per_edge: float = Field(gt=0)
    """Device-memory bytes the aggregation moves per edge of the batch's blocks (all passes)."""
    achieved_bandwidth: float = Field(gt=0, le=1)
    """The share of the peak memory bandwidth a gather reaches: the time is bytes / (share x peak)."""
    host_ops_per_step: float = Field(ge=0)
    """Operators the host dispatches per step (each one kernel launch on a GPU)."""
    host_s_per_op: float = Field(ge=0)
    """Host time per dispatched operator (PyTorch eager dispatch and the launch)."""

    def derive(self, memory_bandwidth: float) -> StepModel:
        """fixed_s = host ops x host time per op; row_s = FLOP per row / peak FLOP/s;
        edge_s = bytes per edge / (achieved share x peak bandwidth)."""
        return StepModel(fixed_s=self.host_ops_per_step * self.host_s_per_op,
                         row_s=self.flops_per_row / self.peak_flops,
                         edge_s=self.bytes_per_edge / (self.achieved_bandwidth * memory_bandwidth))


class AcceleratorProfile(_S):
    name: str
    description: str = ""
    step: StepModel
    reference: ReferenceBatch
    memory_bandwidth: float | None = Field(None, gt=0)
    """Device memory bandwidth (bytes/s): the projection's cache gathers and reorder on this GPU."""
    basis: StepBasis | None = None
    """What `step` is computed from when no GPU measured it; the constants must agree with it."""
    measured: bool = False
    """True when the step constants come from a run on the GPU (`lsm-gnn check gpu`), not assumptions."""
    notes: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _reference_agrees(self):
        if self.basis is not None:
            if self.memory_bandwidth is None:
                raise ValueError("basis: needs memory_bandwidth (edge_s = bytes_per_edge / "
                                 "(achieved_bandwidth x memory_bandwidth))")
            want = self.basis.derive(self.memory_bandwidth)
            for k in ("fixed_s", "row_s", "edge_s"):
                got, exp = getattr(self.step, k), getattr(want, k)
                if abs(got - exp) > 0.01 * exp:
                    raise ValueError(f"step.{k}: the profile states {got:.6g} s, its basis gives {exp:.6g} s "
                                     "(more than 1 % apart)")
        ref = self.reference
        if ref.step_s is not None:
            got = self.step.seconds(ref.input_rows, ref.edges)
            if abs(got - ref.step_s) > 0.01 * ref.step_s:
                raise ValueError(f"reference.step_s: the step model gives {got:.6g} s for the reference batch, "
                                 f"the profile states {ref.step_s:.6g} s (more than 1 % apart)")
        return self

    def as_record(self) -> dict:
        """What a run record says about its accelerator: the profile and the constants it waited."""
        return {"profile": self.name, "measured": self.measured, "step": self.step.model_dump(),
                "reference": self.reference.model_dump()}


def step_scale(cfg) -> float:
    """The multiple of the profile's step time a run waits: train.accelerator_scale (a slower
    accelerator) times emulation.time_scale (time dilation: the whole emulated testbed S times
    slower, docs/accelerators.md, "Time scale"). The one place the time scale reaches the
    accelerator; the run's reported times are divided back by it (lsm_gnn.records.emulation_block)."""
    return float(cfg.train.accelerator_scale) * float(cfg.emulation.time_scale)


def load_accelerator(name_or_path: str | os.PathLike) -> AcceleratorProfile:
    """A packaged accelerator profile by name (a100, h200) or a YAML file by path; validated."""
    from lsm_gnn.utils.yamlmodel import load_model

    return load_model(AcceleratorProfile, name_or_path, PROFILE_DIR, PACKAGED, what="accelerator profile")


class EmulatedAccelerator:
    """Waits the profile's step time for each batch and keeps the busy time for AU.

    The busy time counted is the step time the model gives (what the GPU would be busy for).
    `time.sleep` wakes late under load (0.8 ms per 11 ms step on the 2-core VM with the data plane
    running): the lateness is carried as a debt and taken off the next waits, so the accelerator's
    timeline over a run keeps the model's total (`overshoot_s` is what is still owed at the end).
    The ranks' meeting after the step (DDP's gradient all-reduce) is the caller's, timed as the
    `sync` stage (lsm_gnn.train.sync): waiting for a peer is not the accelerator's time.
    """

    def __init__(self, profile: AcceleratorProfile, *, scale: float = 1.0):
        self.profile = profile
        self.scale = float(scale)
        self.model = profile.step.scaled(scale) if scale != 1.0 else profile.step
        self.busy_s = 0.0
        self.overshoot_s = 0.0
        self.steps = 0

    def step(self, rows: int, edges: int) -> float:
        """Wait one step of a batch of `rows` input rows and `edges` edges; return its step time."""
        t = self.model.seconds(rows, edges)
        due = t - self.overshoot_s
        t0 = time.perf_counter()
        if due > 0:
            time.sleep(due)
        self.overshoot_s = time.perf_counter() - t0 - due
        self.busy_s += t
        self.steps += 1
        return t

    def record(self) -> dict:
        out = {"mode": "emulated", **self.profile.as_record()}
        if self.scale != 1.0:
            out["scale"] = self.scale
            out["step"] = self.model.model_dump()
        return out


def utilisation(busy_s: float, wall_s: float) -> float | None:
    """AU = busy time / wall time (None without a wall time)."""
    return None if wall_s <= 0 else min(1.0, busy_s / wall_s)


def fit_step_model(rows, edges, seconds) -> StepModel:
    """Least squares fit of fixed_s, row_s, edge_s (each >= 0) to measured steps of several batches.

    Measured steps of one GPU at a few batch sizes give a profile its constants; a constant that the
    fit would make negative is held at 0 and the rest refitted."""
    A = np.column_stack([np.ones(len(rows)), np.asarray(rows, float), np.asarray(edges, float)])
    y = np.asarray(seconds, float)
    keep = [0, 1, 2]
    while True:
        coef, *_ = np.linalg.lstsq(A[:, keep], y, rcond=None)
        if (coef >= 0).all() or len(keep) == 1:
            break
        keep.pop(int(np.argmin(coef)))
    full = np.zeros(3)
    full[keep] = np.maximum(coef, 0.0)
    return StepModel(fixed_s=float(full[0]), row_s=float(full[1]), edge_s=float(full[2]))
