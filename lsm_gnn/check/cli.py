"""`lsm-gnn check gpu`, `lsm-gnn check compile` and `lsm-gnn check faults`."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from lsm_gnn.check.gpu import BUDGET_S, STEPS, TESTS_SHARE


@click.group("check")
def check():
    """Checks of the installed package on this machine (GPU tests and benchmarks, kernel compiles)."""


@check.command("gpu")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Folder for gpu_check.json, the logs and the measured accelerator profile.")
@click.option("--quick", is_flag=True, help="Smaller sizes and a shorter budget.")
@click.option("--budget", type=float, default=None,
              help=f"Seconds for the whole check (default {BUDGET_S['full']}, quick {BUDGET_S['quick']}); "
                   f"the GPU tests get {TESTS_SHARE:.0%} of it.")
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
    """Every GPU test and GPU benchmark, time-boxed, into OUT/gpu_check.json.

    Exit status: 0 all passed and every target met, 1 a test or step failed, 2 no GPU, 3 all passed
    but a target was missed."""
    from lsm_gnn.check.gpu import run_check

    sys.exit(run_check(out, quick=quick, budget=budget, tests_dir=tests_dir, data_dir=data_dir, keep_data=keep_data,
                       skip=skip, skip_tests=skip_tests, logs=logs))


@check.command("compile")
@click.option("--arch", default="compute_80", show_default=True, help="Virtual architecture.")
def compile_(arch):
    """Compile every CUDA program of the GPU engines with NVRTC (no GPU needed). Exit 2 without NVRTC."""
    from lsm_gnn.check.nvrtc import compile_source, nvrtc_version, translation_units
    from lsm_gnn.utils import cuda_sources

    version, why = nvrtc_version()
    if version is None:
        click.echo(f"check compile: NVRTC is not usable here ({why})", err=True)
        sys.exit(2)
    click.echo(f"NVRTC {version[0]}.{version[1]}, -arch={arch}, sources: {cuda_sources.where()}")
    units = translation_units()
    failed = 0
    for name, (src, _) in units.items():
        ok, msg = compile_source(name, src, arch)
        failed += not ok
        click.echo(f"{'ok  ' if ok else 'FAIL'} {name}: {msg}")
    click.echo(f"{len(units) - failed} of {len(units)} compiled")
    sys.exit(1 if failed else 0)


@check.command("faults")
@click.option("--cheap", is_flag=True, help="Only the cases that train nothing and start no ranks (what CI runs).")
@click.option("-k", "names", multiple=True, help="Only cases whose name contains this (repeatable).")
@click.option("--list", "list_only", is_flag=True, help="List the cases and exit.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write every case's outcome and the totals to this JSON file.")
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where the temporary folders go (default: the system's temporary folder).")
def faults(cheap, names, list_only, json_path, workdir):
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
    result = run_suite(cases, workdir=workdir, say=click.echo)
    if json_path is not None:
        write_json(json_path, result)
    sys.exit(0 if result["ok"] else 1)
