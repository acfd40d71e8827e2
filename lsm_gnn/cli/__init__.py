"""The `lsm-gnn` command line. Subcommands live next to the code they drive and are imported
lazily, so `lsm-gnn info` does not pay for importing torch and dgl."""

from __future__ import annotations

import errno
import importlib
import os
import sys

import click

# name -> "module:attribute" of a click command or group
COMMANDS = {
    "info": "lsm_gnn.cli.info:info",
    "dataset": "lsm_gnn.cli.dataset:dataset",
    "train": "lsm_gnn.cli.train:train",
    "run": "baselines.cli:run",
    "simulate": "lsm_gnn.cli.simulate:simulate",
    "bench": "lsm_gnn.cli.bench:bench",
    "project": "lsm_gnn.project.cli:project",
    "check": "lsm_gnn.check.cli:check",
    "report": "lsm_gnn.report.cli:report",
}


class LazyGroup(click.Group):
    def __init__(self, *args, lazy: dict[str, str] | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.lazy = lazy or {}

    def list_commands(self, ctx):
        return sorted(set(super().list_commands(ctx)) | set(self.lazy))

    def get_command(self, ctx, name):
        if name in self.lazy:
            module, attr = self.lazy[name].split(":")
            try:
                mod = importlib.import_module(module)
            except ModuleNotFoundError as e:
                if e.name != module:
                    raise
                return None  # a command whose module is not built yet is simply absent
            return getattr(mod, attr)
        return super().get_command(ctx, name)


@click.group(cls=LazyGroup, lazy=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="lsm-gnn")
def cli():
    """lsm-gnn: storage-based multi-GPU GNN training (LSM-GNN) and its baselines."""
    os.environ.setdefault("DGLBACKEND", "pytorch")


def reported_error(e: BaseException) -> str | None:
    """The `error: ...` line the command prints instead of a traceback, or None for a bug (one rule,
    used by `main` and by the fault suite's in-process runs): an LsmGnnError, or the file system
    refusing a write that no writer named (full, read-only, no permission)."""
    from lsm_gnn.utils.errors import LsmGnnError, describe_os_error, is_environment_error

    if isinstance(e, LsmGnnError):
        return f"error: {e}"
    if isinstance(e, OSError) and is_environment_error(e) and e.errno != errno.ENOENT:
        return f"error: {describe_os_error(e)}"
    return None


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
        line = reported_error(e)
        if line is None:
            raise
        click.echo(line, err=True)
        sys.exit(2)
