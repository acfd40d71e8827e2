"""`lsm-gnn project RECORDS... --hardware PROFILE`: what the counts of measured runs cost on other
hardware. docs/projection.md describes the model, the profiles and the validation."""

from __future__ import annotations

import json
import os
import statistics
from pathlib import Path

import click

from lsm_gnn.utils.errors import ConfigError, InputError


def _record_paths(paths) -> list[Path]:
    out = []
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(x for x in p.glob("*.json") if x.is_file())
            if not found:
                raise InputError(f"{p}: no *.json run records in this directory")
            out += found
        else:
            out.append(p)
    return out


def _set_dotted(data: dict, item: str, source: str) -> None:
    key, sep, raw = item.partition("=")
    if not sep or not key:
        raise ConfigError(source, item, "expected KEY=VALUE (dotted key)")
    node = data
    parts = key.split(".")
    for part in parts[:-1]:
        if not isinstance(node.get(part), dict):
            if node.get(part) is None:
                node[part] = {}
            else:
                raise ConfigError(source, key, f"{part!r} is not a section")
        node = node[part]
    from lsm_gnn.utils.yamlmodel import load_yaml

    node[parts[-1]] = load_yaml(raw, f"{source} {key}")


def load_profile_with(name: str, sets=()):
    """The profile `name` with dotted `KEY=VALUE` overrides applied before validation."""
    from lsm_gnn.project.profiles import PACKAGED, load_profile, parse_profile, profile_path

    prof = load_profile(name)  # named errors for the file itself
    if not sets:
        return prof
    from lsm_gnn.utils.yamlmodel import load_yaml

    data = load_yaml(profile_path(name).read_text(), os.fspath(profile_path(name)))
    for item in sets:
        _set_dotted(data, item, "--set")
    src = (profile_path(name).name if name in PACKAGED else os.fspath(name)) + " with --set"
    return parse_profile(data, src)


def storage_sets(bench_path) -> list[str]:
    """Profile overrides from a benchmark output of the same machine.

    `lsm-gnn bench storage --output`: fio's random 4 KiB IOPS (QD32), sequential bandwidth, QD1
    latency and the page cache's work per fault, and the mmap loader's measured cost per fault.
    `lsm-gnn bench compare --accelerator ... --output` (with its limits): the median of the disk
    rates fio measured right before each of its runs, as the IOPS the runs found (on the VM the
    disk moves by tens of per cent between minutes, so a rate measured at another moment, even
    fio's best of the same benchmark, projects them fast). What was not measured keeps the
    profile's value."""
    from lsm_gnn.project.counts import read_json_object
    from lsm_gnn.utils.errors import DataError

    obj = read_json_object(bench_path, "the storage benchmark")
    if obj.get("benchmark") == "compare":
        disk = ((obj.get("disk") or {}).get("iops_before_runs") or {}).get("median")
        if not disk:
            raise DataError(bench_path, "a bench compare output without the disk's rate before its runs "
                            "(run it with emulated accelerators and --limits)",
                            expected='"disk": {"iops_before_runs": {"median": ...}}', found="no disk rates")
        return [f"storage.ssd_iops={disk}"]
    if obj.get("benchmark") != "storage" or not isinstance(obj.get("fio"), dict):
        raise DataError(bench_path, "not the output of lsm-gnn bench storage or bench compare",
                        expected='{"benchmark": "storage", "fio": {...}} or {"benchmark": "compare", "disk": {...}}',
                        found=f"benchmark = {obj.get('benchmark')!r}")
    fio, fault = obj["fio"], obj.get("fault") or {}
    sets = []
    if (fio.get("random") or {}).get("available"):
        sets.append(f"storage.ssd_iops={fio['random']['iops']}")
    if (fio.get("sequential") or {}).get("available"):
        sets.append(f"storage.ssd_bandwidth={fio['sequential']['bw_bytes_per_s']}")
    if fault.get("latency_s"):
        sets.append(f"storage.latency_s={fault['latency_s']}")
    if fault.get("page_cache_s") is not None:
        sets.append(f"cpu.fault_cpu_s={fault['page_cache_s']}")
    if fault.get("capped_mmap_s"):
        sets += [f"storage.fault_s={fault['capped_mmap_s']}", f"storage.fault_processes={fault['capped_processes']}"]
    return sets


def apply_count_overrides(counts: list, items=()) -> None:
    """`SYSTEM.FIELD=VALUE` on the per-iteration counts. Setting `storage_rows` scales the storage
    reads and bytes by the same factor unless they are set too; `victim_hits` likewise alone."""
    from lsm_gnn.project.counts import Counts

    by_system = {c.system: c for c in counts}
    fields = set(Counts.__dataclass_fields__)
    parsed: dict = {}
    for item in items:
        key, sep, raw = item.partition("=")
        system, dot, name = key.partition(".")
        if not sep or not dot:
            raise ConfigError("--counts", item, "expected SYSTEM.FIELD=VALUE, e.g. lsm.storage_rows=19500")
        if system not in by_system:
            raise ConfigError("--counts", key, f"no record of system {system!r} among the records")
        if name not in fields or name in ("system", "source", "measured", "fanouts"):
            raise ConfigError("--counts", key, f"unknown count {name!r}")
        try:
            parsed.setdefault(system, {})[name] = float(raw)
        except ValueError:
            raise ConfigError("--counts", key, f"not a number: {raw!r}") from None
    for system, vals in parsed.items():
        c = by_system[system]
        if "storage_rows" in vals and c.storage_rows > 0:
            f = vals["storage_rows"] / c.storage_rows
            vals.setdefault("storage_io_ops", c.storage_io_ops * f)
            vals.setdefault("storage_bytes", c.storage_bytes * f)
        for name, v in vals.items():
            cur = getattr(c, name)
            setattr(c, name, int(v) if isinstance(cur, int) and not isinstance(cur, bool) else v)


def scale_nodes(counts: list, nodes: int) -> None:
    """The scaling rule of docs/projection.md: the same batch settings give the same counts per
    iteration; the iterations per epoch grow with the node count (same training split)."""
    for c in counts:
        if not c.num_rows:
            raise InputError(f"{c.source}: the record does not say how many nodes its graph has "
                             "(metrics.dataset.nodes); --scale-nodes needs it")
        c.iterations_per_epoch = int(round(c.iterations_per_epoch * nodes / c.num_rows))
        c.num_rows = nodes
        c.measured = {}


def _text(res: dict) -> str:
    lines = [f"profile {res['profile']}: projected epoch time per system (steady epoch)"]
    for s, v in res["systems"].items():
        lines.append(f"  {s:9s} {v['epoch_s']:10.1f} s  ({1e3 * v['iteration_s']:8.2f} ms x {v['iterations_per_epoch']} "
                     f"iterations)  bottleneck: {v['bottleneck']} ({v['bottleneck_stage']})")
        lanes = ", ".join(f"{n} {1e3 * ln['seconds']:.2f}" for n, ln in v["lanes"].items())
        lines.append(f"            lanes (ms): {lanes}; CPU contention x{v['cpu_contention']:.2f}")
    for k, v in res["ratios"].items():
        lines.append(f"  {k}: {v:.2f}x")
    return "\n".join(lines)


def _validation_text(res: dict) -> str:
    over = res.get("profile_overrides") or []
    ci = res.get("cpu_index") or {}
    lines = [f"validation on profile {res['profile']}: projected vs measured steady epoch (tolerance {res['tolerance']:.0%})"]
    if ci.get("runs_s") is not None:
        ref = "n/a" if ci.get("profile_s") is None else f"{1e3 * ci['profile_s']:.2f} ms"
        where = f"the median of {ci['samples']} measured around the runs" if ci["from"] == "records" else "now"
        lines.append(f"  CPU speed index {1e3 * ci['runs_s']:.2f} ms ({where}), with the profile's figures {ref}: "
                     f"CPU figures x{ci['factor']:.3f}")
    mach = res.get("machine") or {}
    for k, v in (mach.get("measured") or {}).items():
        lines.append(f"  measured here: {k} = {v['value']:.4g} (the profile's {v['replaced']:.4g}; {v['how']})")
    if over:
        lines.append("  with " + ", ".join(over))
    lines.append(f"  {'system':9s} {'projected':>10s} {'measured':>10s} {'error':>8s}  bottleneck")
    for s, v in res["systems"].items():
        meas = "n/a" if v["measured_epoch_s"] is None else f"{v['measured_epoch_s']:.1f}"
        err = "n/a" if v["error"] is None else f"{v['error']:+.1%}"
        runs = v.get("measured_runs_s") or []
        rep = "" if len(runs) < 2 else f"  [{len(runs)} runs: " + ", ".join(f"{x:.1f}" for x in runs) + "]"
        gate = "" if v.get("gated", True) else "  (reported, not gating)"
        lines.append(f"  {s:9s} {v['projected_epoch_s']:10.1f} {meas:>10s} {err:>8s}  "
                     f"{v['bottleneck']} ({v['bottleneck_stage']}){rep}{gate}")
    mx, allx = res["max_abs_error"], res.get("max_abs_error_all")
    over_what = ", ".join(res.get("gated_systems") or []) or "no gated system with a record"
    lines.append(f"  max |error| over {over_what} {'n/a' if mx is None else f'{mx:.1%}'}: "
                 f"{'within' if res['ok'] else 'NOT within'} {res['tolerance']:.0%}"
                 + ("" if allx is None or allx == mx else f" (over every system {allx:.1%})"))
    return "\n".join(lines)


def run_projection(paths, hardware: str, *, sets=(), count_sets=(), nodes: int | None = None,
                   validate_only: bool = False, tolerance: float = 0.20, storage_from=None,
                   calibrate_cpu: bool = False, cpu_index_s: float | None = None,
                   profile_figures: bool = False, gate="claim", machine_seconds: float = 1.0) -> dict:
    """`calibrate_cpu`: put a CPU-only profile's CPU figures at the speed the runs had: the median of
    the CPU speed indexes the records carry (measured before and after each run, baselines.harness),
    or, when a record has none, the index now (`cpu_index_s`, measured here when not given;
    lsm_gnn.project.calibrate).

    Validating on a CPU profile (this machine's), the machine constants are measured here unless
    `profile_figures`: the host memory gather (lsm_gnn.project.calibrate.host_memory_bandwidth) and,
    without `calibrate_cpu`, the CPU speed index now, which puts the per-row CPU figures at this
    machine's speed; each is recorded under `machine` with the value it replaced (an explicit
    `--set` or `--storage-from` figure wins). `gate`: the systems whose errors decide `ok`
    (model.validate; "claim": claim (a)'s, model.CLAIM_SYSTEMS; None: all). One index for all the records, not one per run: on the VM the index
    of a run did not follow its time (the correlation over 24 runs of the matrix was -0.6 to +0.4
    per system), while the median over a matrix follows the VM's speed over its quarter hour."""
    from lsm_gnn.project.calibrate import cpu_index_seconds, speed_sets
    from lsm_gnn.project.counts import load_counts, merge_repeats
    from lsm_gnn.project.model import project_all, ratios, validate

    fixed = [*(storage_sets(storage_from) if storage_from else []), *sets]  # an explicit --set wins
    loaded = [load_counts(p) for p in _record_paths(paths)]
    by_system: dict = {}
    for c in loaded:
        by_system.setdefault(c.system, []).append(c)
    counts = [merge_repeats(runs) for runs in by_system.values()]  # several records of a system: repeats
    apply_count_overrides(counts, count_sets)
    prof = load_profile_with(hardware, fixed)
    index = {"profile_s": prof.cpu.index_s, "runs_s": None, "samples": 0, "factor": 1.0, "from": None}
    machine = {"from": "the profile's figures", "measured": {}}
    if validate_only and prof.cpu_only and not profile_figures:
        from lsm_gnn.project.calibrate import machine_sets

        given = {item.partition("=")[0] for item in fixed}
        scale_here = not (calibrate_cpu or cpu_index_s is not None)  # else the index of the block below
        # the gather measured at the records' batch: its speed depends on the batch's size
        ms = machine_sets(prof, seconds=machine_seconds, index_s=None if scale_here else prof.cpu.index_s,
                          batch_rows=int(statistics.median(c.rows for c in counts)) or 1,
                          row_bytes=int(statistics.median(c.row_bytes for c in counts)))
        keep = [x for x in ms["sets"] if x.partition("=")[0] not in given
                and (scale_here or x.partition("=")[0] == "links.host_memory.bandwidth")]
        kept = {x.partition("=")[0] for x in keep}
        machine = {"from": "measured here, now (lsm_gnn.project.calibrate.machine_sets)",
                   "measured": {k: v for k, v in ms["measured"].items() if k in kept}}
        fixed = [*keep, *fixed]
        prof = load_profile_with(hardware, fixed)
        if scale_here and ms["index_s"] is not None:
            index = {**index, "runs_s": ms["index_s"], "samples": 1, "from": "now",
                     "factor": ms["index_s"] / prof.cpu.index_s if prof.cpu.index_s else 1.0}
    if calibrate_cpu or cpu_index_s is not None:
        per_run = [c.measured.get("cpu_index_s") or [] for c in loaded]
        samples = [x for run in per_run for x in run]
        if all(per_run):
            at, src = statistics.median(samples), "records"
        else:  # some record without its own: the speed now
            at, src = (cpu_index_s if cpu_index_s is not None else cpu_index_seconds()), "now"
        speed, factor = speed_sets(prof, at, skip={item.partition("=")[0] for item in fixed})
        prof = load_profile_with(hardware, [*speed, *fixed])
        index = {**index, "runs_s": at, "samples": len(samples) if src == "records" else 1, "factor": factor,
                 "from": src}
    if validate_only:
        if nodes is not None:
            raise InputError("--validate compares with the measured epochs: it cannot be combined with --scale-nodes")
        from lsm_gnn.project.model import CLAIM_SYSTEMS

        return {**validate(counts, prof, tolerance, systems=CLAIM_SYSTEMS if gate == "claim" else gate), "profile_overrides": list(fixed),
                "cpu_index": index, "machine": machine}
    if nodes is not None:
        scale_nodes(counts, nodes)
    projs = project_all(counts, prof)
    return {"profile": prof.name, "profile_overrides": list(fixed), "count_overrides": list(count_sets),
            "cpu_index": index,
            "scaled_to_nodes": nodes,
            "systems": {s: pr.as_dict() for s, pr in projs.items()}, "ratios": ratios(projs),
            "counts": {c.system: {k: v for k, v in c.as_dict().items() if k != "measured"} for c in counts}}


@click.command("project")
@click.argument("records", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--hardware", "hardware", required=True,
              help="Profile: this-machine, paper, h200x8 (lsm_gnn/project/profiles/) or a YAML path.")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="Override a profile value (dotted), e.g. storage.ssds_per_device=4.")
@click.option("--storage-from", "storage_from", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Take the SSD's IOPS, bandwidth, QD1 latency and the page cache's cost per fault from "
                   "a `lsm-gnn bench storage --output` file, or the disk's IOPS before each run from a "
                   "`lsm-gnn bench compare --output` file (this machine, measured in the same run).")
@click.option("--calibrate-cpu", "calibrate_cpu", is_flag=True,
              help="Scale a CPU-only profile's CPU figures from the CPU speed index stated with them (cpu.index_s) "
                   "to the median index the records measured around their runs (a record without one: the "
                   "index measured now; lsm_gnn/project/calibrate.py).")
@click.option("--counts", "count_sets", multiple=True, metavar="SYSTEM.FIELD=VALUE",
              help="Override a per-iteration count of one system, e.g. lsm.storage_rows=19500.")
@click.option("--scale-nodes", "nodes", type=click.IntRange(min=1), default=None,
              help="Scale the epoch to a graph of N nodes (same counts per iteration, more iterations).")
@click.option("--validate", "validate_only", is_flag=True,
              help="Projected vs measured steady epoch per record; exit status 1 beyond the tolerance.")
@click.option("--tolerance", type=click.FloatRange(min=0), default=0.20, show_default=True)
@click.option("--gate", "gate", default="claim", show_default=True, metavar="SYSTEMS",
              help="With --validate: the systems whose errors decide the exit status, separated by commas "
                   "(`claim`: the systems claim (a) compares, lsm and distdgl; `all`: every system); the others "
                   "are reported.")
@click.option("--profile-figures", "profile_figures", is_flag=True,
              help="With --validate on a CPU profile: use the profile's machine constants as they are, instead of "
                   "measuring the host memory gather and the CPU speed here (a second or two).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object.")
def project_cmd(records, hardware, sets, storage_from, calibrate_cpu, count_sets, nodes, validate_only, tolerance,
                gate, profile_figures, as_json):
    """Project epoch time per system from run records' counts onto a hardware profile."""
    g = gate.strip()
    systems = None if g == "all" else "claim" if g == "claim" else tuple(x.strip() for x in g.split(",") if x.strip())
    if systems == ():
        raise ConfigError("--gate", gate, "expected systems separated by commas, or all")
    res = run_projection(records, hardware, sets=sets, count_sets=count_sets, nodes=nodes,
                         validate_only=validate_only, tolerance=tolerance, storage_from=storage_from,
                         calibrate_cpu=calibrate_cpu, profile_figures=profile_figures, gate=systems)
    if as_json:
        click.echo(json.dumps(res, indent=2))
    else:
        click.echo(_validation_text(res) if validate_only else _text(res))
    if validate_only and not res["ok"]:
        raise SystemExit(1)


project = project_cmd
__all__ = ["project", "run_projection", "load_profile_with", "apply_count_overrides", "scale_nodes", "storage_sets"]
