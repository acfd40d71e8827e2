"""`lsm-gnn check gpu`, `lsm-gnn check compile` and `lsm-gnn check faults`."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from lsm_gnn.check.gpu import BUDGET_S, STEPS, TESTS_LIMIT_S, TESTS_SHARE
from lsm_gnn.utils.outpaths import output_option


@click.group("check")
def check():
    """Checks of the installed package on this machine (GPU tests and benchmarks, kernel compiles)."""


@check.command("gpu")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True,
              callback=output_option("into", "check folder"),
              help="Folder for gpu_check.json, the measured accelerator profile (and the logs unless --logs).")
@click.option("--quick", is_flag=True, help="Smaller sizes and a shorter budget.")
@click.option("--budget", type=float, default=None,
              help=f"Seconds for the whole check (default {BUDGET_S['full']}, quick {BUDGET_S['quick']}: the sum "
                   f"of its parts' limits); the GPU tests get {TESTS_LIMIT_S['full']} s (quick "
                   f"{TESTS_LIMIT_S['quick']}), or {TESTS_SHARE:.0%} of a shorter budget.")
@click.option("--tests", "tests_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="The repository's tests/ folder (default: ./tests).")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where the synthetic graph is generated (O_DIRECT wanted; default ./data/gpu-check, removed after).")
@click.option("--keep-data", is_flag=True, help="Keep the generated graph.")
@click.option("--skip", multiple=True, type=click.Choice(list(STEPS)), help="Skip a step (repeatable).")
@click.option("--skip-tests", is_flag=True, help="Do not run pytest -m gpu.")
@click.option("--logs", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Folder for the tests' and steps' logs (default: --out; tools/gpu-check.sh packs them).")
def gpu(out, quick, budget, tests_dir, data_dir, keep_data, skip, skip_tests, logs):
    """Every GPU test and the GPU steps its targets read, time-boxed, into OUT/gpu_check.json.

    Exit status: 0 all passed and every target met, 1 a test or step failed, 2 no GPU, 3 all passed
    but a target was missed."""
    from lsm_gnn.check.gpu import run_check

    sys.exit(run_check(out, quick=quick, budget=budget, tests_dir=tests_dir, data_dir=data_dir, keep_data=keep_data,
                       skip=skip, skip_tests=skip_tests, logs=logs))


@check.command("compile")
@click.option("--arch", default="sm_80,sm_90", show_default=True,
              help="Comma-separated real architectures (sm_80: A100, sm_90: H100).")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              callback=output_option(),
              help="Also write the report (every unit, every kernel's resources and occupancy) to this JSON file.")
def compile_(arch, json_path):
    """Compile every CUDA program of the GPU engines for real GPUs (no GPU needed) and report each
    kernel's registers, spills, shared memory and the occupancy at its launch size.

    With nvcc (the PATH, $CUDA_HOME): the full report. Without it, NVRTC through CuPy if importable:
    errors and the kernel list only. Exit status: 0 clean (no error, warning or spill), 1 a problem,
    2 no compiler."""
    from lsm_gnn.check import compile as cc
    from lsm_gnn.utils.atomic import write_json

    archs = tuple(a.strip() for a in arch.split(",") if a.strip())
    bad = [a for a in archs if a not in cc.LIMITS]
    if not archs or bad:
        raise click.BadParameter(f"expected some of {sorted(cc.LIMITS)}, found {arch!r}", param_hint="--arch")
    if cc.find_nvcc() is None:
        sys.exit(_compile_nvrtc(archs))
    report = cc.run(archs)
    click.echo(f"{report['compiler']}, options {' '.join(report['options'])} (+ -cubin -arch=<sm> -Xptxas -v), "
               f"sources: {report['sources']}")
    for u in report["units"]:
        click.echo(f"{'ok  ' if u['ok'] else 'FAIL'} {u['unit']} ({u['arch']})")
    click.echo(cc.table(report))
    for p in report["problems"]:
        click.echo(f"problem: {p}", err=True)
    if json_path is not None:
        write_json(json_path, report)
    n = len(report["units"])
    click.echo(f"{sum(u['ok'] for u in report['units'])} of {n} compiled cleanly; "
               f"{len(report['problems'])} problem(s)")
    sys.exit(0 if report["ok"] else 1)


def _compile_nvrtc(archs) -> int:
    """The fallback without nvcc: NVRTC through CuPy (PTX; errors and kernel entries only)."""
    from lsm_gnn.check.nvrtc import compile_source, nvrtc_version, translation_units
    from lsm_gnn.utils import cuda_sources

    version, why = nvrtc_version()
    if version is None:
        click.echo(f"check compile: neither nvcc (PATH, $CUDA_HOME/bin) nor NVRTC is usable here ({why})", err=True)
        return 2
    click.echo(f"no nvcc: NVRTC {version[0]}.{version[1]} (no resource report), sources: {cuda_sources.where()}")
    failed = total = 0
    for name, (src, _) in translation_units().items():
        for arch in archs:
            ok, msg = compile_source(name, src, arch.replace("sm_", "compute_"))
            failed += not ok
            total += 1
            click.echo(f"{'ok  ' if ok else 'FAIL'} {name} ({arch}): {msg}")
    click.echo(f"{total - failed} of {total} compiled")
    return 1 if failed else 0


@check.command("faults")
@click.option("--cheap", is_flag=True, help="Only the cases that train nothing and start no ranks (what CI runs).")
@click.option("-k", "names", multiple=True, help="Only cases whose name contains this (repeatable).")
@click.option("--list", "list_only", is_flag=True, help="List the cases and exit.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              callback=output_option(),
              help="Also write every case's outcome and the totals to this JSON file.")
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where the temporary folders go (default: the system's temporary folder).")
@click.pass_context
def faults(ctx, cheap, names, list_only, json_path, workdir):
    """Inject each fault into a copy of a tiny synthetic graph and count how every run ended:
    clear error, failed record, recovered, silently wrong, hang, traceback (docs/faults.md).

    Exit status: 0 when every case ended in a clear error, a failed record or a recovery; 1 otherwise."""
    from lsm_gnn.check.faults import run_suite, select
    from lsm_gnn.utils.atomic import write_json

    cases = select(cheap, list(names))
    if list_only:
        for c in cases:
            click.echo(f"{c.name:<36} {'cheap' if c.cheap else 'full ':<6} {c.what}")
        return
    if not cases:
        raise click.UsageError("no case matches")
    result = run_suite(cases, command=ctx.find_root().command, workdir=workdir, say=click.echo)
    if json_path is not None:
        write_json(json_path, result)
    sys.exit(0 if result["ok"] else 1)
