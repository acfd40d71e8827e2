"""Measure the real train step on a device and fit the emulation's step model to it.

What an emulated accelerator waits (lsm_gnn.accelerator) is `fixed_s + row_s x R + edge_s x E`; a
packaged profile's constants are assumptions until a GPU measures them. `measure_step` times the
train step the training loop runs (lsm_gnn.train.loop: forward, cross-entropy, zero_grad, backward,
Adam's step, the loss read back) of the reference model (`build_model` with the run config's
defaults: GraphSAGE, hidden 256, 2 layers; 1024-dim float32 rows, 19 classes, fan-outs 10,15) on
sampled blocks of the reference batch's shape at several batch sizes, fits the three constants
(`fit_step_model`) and writes a profile YAML (`measured: true`) that `load_accelerator` reads.
`lsm-gnn check gpu` runs it as one step on the GPU; a test runs it on the CPU, small.

Shapes: the blocks are synthetic (no dataset is read), with the sizes a sampler gives. Layer by
layer, input layer first, the destination nodes of a layer are the source nodes of the next; a
layer with fan-out f draws f neighbours per destination node, and its source nodes are the distinct
nodes among the destinations and their draws. How many are distinct follows the expected count of
distinct values among n uniform draws from U values, U(1 - exp(-n / U)), with one U per layer chosen
so that the reference batch (the h200 profile's: batch 1024 -> 42,730 input rows, 169,600 edges on
the synthetic small graph) comes out with its measured sizes. So the input rows grow more slowly than
the edges with the batch size, as on the graph, and the fit can tell the per-row cost from the
per-edge one. Timing: the features and blocks are on the device before the clock starts (as the
loader delivers them), each step gets the blocks afresh (their CSR is built inside the step, as for a
new batch), torch.cuda.synchronize() around each step on CUDA, warm-up steps excluded, the median
of the repeats.
"""

from __future__ import annotations

import math
import re
import statistics
import time
from pathlib import Path
from types import SimpleNamespace

from lsm_gnn.accelerator import AcceleratorProfile, ReferenceBatch, fit_step_model, load_accelerator
from lsm_gnn.models.blocks import batch_edges

REFERENCE_PROFILE = "h200"      # its reference batch: the sizes the shapes are calibrated to
REFERENCE_BATCH_SIZE = 1024     # the batch of that reference ("batch 1024, fan-outs 10,15")
FANOUTS = (10, 15)              # input layer first, as sampler.fanouts
FEATURE_DIM = 1024
NUM_CLASSES = 19
BATCH_SIZES = (128, 256, 512, 1024)


def _distinct(draws: float, universe: float) -> float:
    return universe * -math.expm1(-draws / universe)


def _universe(draws: float, distinct: float) -> float:
    """U with U(1 - exp(-draws / U)) = distinct (bisection; distinct < draws)."""
    if distinct >= draws:
        return math.inf
    lo, hi = distinct, distinct * 1e6
    for _ in range(200):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if _distinct(draws, mid) < distinct else (lo, mid)
    return math.sqrt(lo * hi)


def layer_sizes(batch_size: int, fanouts=FANOUTS, reference: ReferenceBatch | None = None,
                reference_batch: int = REFERENCE_BATCH_SIZE) -> list[int]:
    """Node counts per layer, input layer first: [input rows, ..., batch_size] for 2 fan-outs,
    calibrated to `reference` (the reference profile's batch) at `reference_batch`."""
    ref = reference or load_accelerator(REFERENCE_PROFILE).reference
    f0, f1 = fanouts
    # the reference's layer-1 nodes from its edges: E = B x f1 + N1 x f0
    n1_ref = (ref.edges - reference_batch * f1) / f0
    u1 = _universe(reference_batch * (1 + f1), n1_ref)
    u0 = _universe(n1_ref * (1 + f0), ref.input_rows)
    n1 = max(batch_size, round(_distinct(batch_size * (1 + f1), u1)))
    n0 = max(n1, round(_distinct(n1 * (1 + f0), u0)))
    return [n0, n1, batch_size]


def synthetic_blocks(batch_size: int, fanouts=FANOUTS, seed: int = 0, device="cpu", **shape):
    """Index blocks (lsm_gnn.models.Block) of a sampled batch of `batch_size` seeds: layer sizes from
    `layer_sizes`, `f` edges per destination node (sorted by destination), sources drawn uniformly."""
    import torch

    from lsm_gnn.models import Block

    sizes = layer_sizes(batch_size, fanouts, **shape)
    g = torch.Generator().manual_seed(seed)
    blocks = []
    for i, f in enumerate(fanouts):
        num_src, num_dst = sizes[i], sizes[i + 1]
        dst = torch.arange(num_dst, dtype=torch.int64).repeat_interleave(f)
        src = torch.randint(0, num_src, (num_dst * f,), generator=g, dtype=torch.int64)
        blocks.append(Block.homogeneous(num_src, num_dst, src.to(device), dst.to(device)))
    return blocks


def reference_model(hidden: int | None = None, feature_dim: int = FEATURE_DIM, num_classes: int = NUM_CLASSES,
                    num_layers: int = len(FANOUTS)):
    """The model the training loop builds from the run config's defaults (GraphSAGE, hidden 256)."""
    from lsm_gnn.config import ModelConfig
    from lsm_gnn.models import build_model

    cfg = ModelConfig() if hidden is None else ModelConfig(hidden=hidden)
    shape = SimpleNamespace(is_homogeneous=True, root="<synthetic blocks>", num_classes=num_classes,
                            features=lambda: SimpleNamespace(dim=feature_dim))
    return cfg, build_model(cfg, shape, num_layers)


def measure_step(device: str = "cuda", batch_sizes=BATCH_SIZES, *, hidden: int | None = None,
                 feature_dim: int = FEATURE_DIM, num_classes: int = NUM_CLASSES, fanouts=FANOUTS,
                 warmup: int = 5, repeats: int = 20, seed: int = 0, out_dir: str | None = None,
                 name: str | None = None) -> dict:
    """Time the train step at each batch size; fit the step model; write `<out_dir>/<name>.yaml`.

    Returns the points (batch_size, input_rows, edges, seconds, every repeat), the fitted constants,
    the profile and the YAML's path (when `out_dir` is given)."""
    import torch
    import torch.nn.functional as F

    from lsm_gnn.config import TrainConfig

    dev = torch.device(device)
    cuda = dev.type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    torch.manual_seed(seed)
    model_cfg, model = reference_model(hidden, feature_dim, num_classes, len(fanouts))
    model = model.to(dev).train()
    train_cfg = TrainConfig()
    opt = torch.optim.Adam(model.parameters(), lr=train_cfg.lr, weight_decay=train_cfg.weight_decay)
    points = []
    for i, b in enumerate(batch_sizes):
        blocks = synthetic_blocks(int(b), fanouts, seed=seed + i, device=dev)
        rows, edges = blocks[0].num_src, batch_edges(blocks)
        gen = torch.Generator().manual_seed(seed + i)
        x = torch.randn(rows, feature_dim, generator=gen).to(dev)
        labels = torch.randint(0, num_classes, (int(b),), generator=gen).to(dev)
        times = []
        for r in range(warmup + repeats):
            fresh = [blk.to(dev) for blk in blocks]  # a new batch's blocks: their CSR is built in the step
            sync()
            t0 = time.perf_counter()
            logits = model(fresh, x)           # the train stage of lsm_gnn.train.loop
            loss = F.cross_entropy(logits, labels)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            float(loss.item())
            sync()
            if r >= warmup:
                times.append(time.perf_counter() - t0)
        points.append({"batch_size": int(b), "input_rows": int(rows), "edges": int(edges),
                       "seconds": statistics.median(times), "repeats_s": times})
    step = fit_step_model([p["input_rows"] for p in points], [p["edges"] for p in points],
                          [p["seconds"] for p in points])
    for p in points:
        p["fitted_s"] = step.seconds(p["input_rows"], p["edges"])
    device_name = torch.cuda.get_device_name(dev) if cuda else f"CPU ({torch.get_num_threads()} torch threads)"
    ref_b = max(points, key=lambda p: p["batch_size"])
    profile = AcceleratorProfile(
        name=name or f"{_slug(device_name) if cuda else 'cpu'}-measured",
        description=(f"{device_name}, measured by lsm_gnn.accelerator.measure: GraphSAGE hidden {model_cfg.hidden}, "
                     f"{len(fanouts)} layers, {feature_dim}-dim float32 input rows, {num_classes} classes, Adam"),
        step=step,
        reference=ReferenceBatch(
            description=f"synthetic blocks of batch {ref_b['batch_size']}, fan-outs {','.join(map(str, fanouts))} "
                        "(input layer first), the reference batch's shape",
            input_rows=ref_b["input_rows"], edges=ref_b["edges"], step_s=ref_b["fitted_s"]),
        measured=True,
        notes=[f"torch {torch.__version__}" + (f", CUDA {torch.version.cuda}" if cuda else ""),
               f"median of {repeats} steps after {warmup} warm-up steps per batch size"
               + (", torch.cuda.synchronize() around each" if cuda else ""),
               *(f"batch {p['batch_size']}: R {p['input_rows']}, E {p['edges']}: measured {p['seconds']:.6g} s, "
                 f"fitted {p['fitted_s']:.6g} s" for p in points),
               "reference.step_s is the fitted model at the reference batch (the measured value is above)"])
    out = {"device": device_name, "points": points, "step": step.model_dump(), "profile": profile.model_dump(),
           "fit_max_error": max(abs(p["fitted_s"] - p["seconds"]) / p["seconds"] for p in points)}
    if out_dir is not None:
        out["profile_path"] = str(write_profile(profile, Path(out_dir) / f"{profile.name}.yaml"))
    print(f"[accelerator] {device_name}: " + ", ".join(
        f"batch {p['batch_size']} {1e3 * p['seconds']:.2f} ms" for p in points)
        + f" -> {step.formula(ref_b['input_rows'], ref_b['edges'])}", flush=True)
    return out


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower().replace("nvidia", "")).strip("-") or "gpu"


def write_profile(profile: AcceleratorProfile, path: Path) -> Path:
    """The profile as YAML (what load_accelerator reads back), checked by reading it back."""
    import yaml

    from lsm_gnn.utils.atomic import write_text

    header = (f"# {profile.name}: measured by lsm_gnn.accelerator.measure (`lsm-gnn check gpu`); use it with\n"
              f"# load_accelerator('{path.name}') or copy it to lsm_gnn/accelerator/profiles/.\n")
    write_text(path, header + yaml.safe_dump(profile.model_dump(), sort_keys=False, width=110))
    load_accelerator(path)
    return path


# operators that only make or reshape a tensor's metadata (or read it): no kernel on a GPU
_NO_KERNEL = frozenset(
    "aten::" + n for n in (
        "as_strided empty empty_strided resolve_conj resolve_neg view alias detach as_strided_ flatten _nnz to t "
        "transpose expand reshape unsqueeze squeeze select slice permute _reshape_alias contiguous empty_like "
        "result_type lift_fresh _unsafe_view set_ values crow_indices col_indices row_indices ccol_indices "
        "unflatten unsqueeze_ squeeze_ expand_as narrow _sparse_compressed_tensor_unsafe resize_").split())


def _kernel_ops(events) -> int:
    """Operators of a torch.profiler trace that do work (a leaf of the op tree, not a view)."""
    def aten(e):
        return e.name.startswith("aten::")

    return sum(1 for e in events if aten(e) and e.name not in _NO_KERNEL
               and all(c.name in _NO_KERNEL or not aten(c) for c in e.cpu_children))


def count_host_ops(batch_size: int = 64, *, fanouts=FANOUTS, seed: int = 0) -> dict:
    """Operators the host dispatches in one train step of the reference model (each is one kernel
    launch on a GPU): the basis of a profile's `host_ops_per_step`. Counted with torch.profiler on
    the CPU, phase by phase: forward with the loss, backward, Adam's step, the loss read back. The
    count does not depend on the batch's size. Adam is counted as CUDA runs it by default
    (foreach=True: one multi-tensor launch per `_foreach_` operator; on the CPU each of those runs
    per parameter underneath)."""
    import torch
    import torch.nn.functional as F
    from torch.profiler import ProfilerActivity, profile

    from lsm_gnn.config import TrainConfig

    torch.manual_seed(seed)
    _, model = reference_model(num_layers=len(fanouts))
    model.train()
    train_cfg = TrainConfig()
    opt = torch.optim.Adam(model.parameters(), lr=train_cfg.lr, weight_decay=train_cfg.weight_decay, foreach=True)
    blocks = synthetic_blocks(batch_size, fanouts, seed=seed)
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(blocks[0].num_src, FEATURE_DIM, generator=gen)
    labels = torch.randint(0, NUM_CLASSES, (batch_size,), generator=gen)
    for _ in range(2):  # the first steps allocate Adam's state
        loss = F.cross_entropy(model(synthetic_blocks(batch_size, fanouts, seed=seed), x), labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    counts = {}
    with profile(activities=[ProfilerActivity.CPU]) as p:
        loss = F.cross_entropy(model(blocks, x), labels)
    counts["forward"] = _kernel_ops(p.events())
    with profile(activities=[ProfilerActivity.CPU]) as p:
        opt.zero_grad(set_to_none=True)
        loss.backward()
    counts["backward"] = _kernel_ops(p.events())
    with profile(activities=[ProfilerActivity.CPU]) as p:
        opt.step()
    counts["optimizer"] = sum(1 for e in p.events() if e.name.startswith("aten::_foreach_"))
    with profile(activities=[ProfilerActivity.CPU]) as p:
        float(loss.item())
    counts["readback"] = _kernel_ops(p.events())
    counts["total"] = sum(counts.values())
    return counts
