"""The `lsm-gnn` command line. Subcommands live next to the code they drive and are imported
lazily, so `lsm-gnn info` does not pay for importing torch and dgl."""

from __future__ import annotations

import os
import sys

import click

from lsm_gnn.cli.group import LazyGroup

COMMANDS = ("info", "dataset", "train", "run", "simulate", "bench", "project", "check", "report")


def command(name: str) -> click.Command:
    """The click command `name`, imported on first use (so `lsm-gnn info` does not pay for torch and
    dgl): imports, not "module:attribute" strings, so the layering test sees every room it names."""
    if name == "info":
        from lsm_gnn.cli.info import info as cmd
    elif name == "dataset":
        from lsm_gnn.cli.dataset import dataset as cmd
    elif name == "train":
        from lsm_gnn.cli.train import train as cmd
    elif name == "run":
        from baselines.cli import run as cmd
    elif name == "simulate":
        from lsm_gnn.cli.simulate import simulate as cmd
    elif name == "bench":
        from lsm_gnn.cli.bench import bench as cmd
    elif name == "project":
        from lsm_gnn.project.cli import project as cmd
    elif name == "check":
        from lsm_gnn.check.cli import check as cmd
    elif name == "report":
        from lsm_gnn.report.cli import report as cmd
    else:
        raise KeyError(name)
    return cmd


@click.group(cls=LazyGroup, names=COMMANDS, load=command, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="lsm-gnn")
def cli():
    """lsm-gnn: storage-based multi-GPU GNN training (LSM-GNN) and its baselines."""
    os.environ.setdefault("DGLBACKEND", "pytorch")


def main():
    try:
        cli.main(standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
    except Exception as e:
        from lsm_gnn.utils.errors import reported_error

        line = reported_error(e)
        if line is None:
            raise
        click.echo(line, err=True)
        sys.exit(2)
