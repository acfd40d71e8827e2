"""`lsm-gnn info`: versions, CPUs, memory, GPU/CuPy usability, and storage facts of a path."""

from __future__ import annotations

import json

import click


@click.command()
@click.argument("path", required=False, type=click.Path(exists=True))
@click.option("--json", "as_json", is_flag=True, help="One JSON object instead of text.")
def info(path, as_json):
    """Show what this machine offers; with PATH, its filesystem, block size and O_DIRECT support."""
    from lsm_gnn.utils.machine import gpu_status, hardware, path_storage_info, versions

    out = {"versions": versions(), "hardware": hardware(), "gpu": gpu_status()}
    if path:
        out["path"] = path_storage_info(path)
    if as_json:
        click.echo(json.dumps(out, indent=2))
        return
    v, h, g = out["versions"], out["hardware"], out["gpu"]
    click.echo("versions:  " + ", ".join(f"{k} {val}" for k, val in v.items()))
    click.echo(f"cpu:       {h['cpu_model']} ({h['cpus']} logical CPUs)")
    click.echo(f"memory:    {h['memory_bytes'] / 2**30:.1f} GiB")
    click.echo(f"gpu:       torch.cuda={g['torch_cuda']} cupy installed={g['cupy_installed']} "
               f"usable={g['cupy']} {g['gpu_name'] or ''}".rstrip())
    if path:
        p = out["path"]
        fs = p["filesystem"] or {}
        click.echo(f"path:      {p['path']}")
        click.echo(f"  fs:      {fs.get('fstype')} on {fs.get('device')} (mounted at {fs.get('mountpoint')})")
        click.echo(f"  block:   {p['block_size']} B, free {p['free_bytes'] / 2**30:.1f} GiB")
        click.echo(f"  O_DIRECT reads: {'yes' if p['o_direct'] else 'no'}")
