"""A click group whose subcommands are imported on first use (the command table and `bench`)."""

from __future__ import annotations

import click


class LazyGroup(click.Group):
    """A group whose subcommands (`names`) are built by `load(name)` on first use."""

    def __init__(self, *args, names: tuple[str, ...] = (), load=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.names, self.load = tuple(names), load

    def list_commands(self, ctx):
        return sorted(set(super().list_commands(ctx)) | set(self.names))

    def get_command(self, ctx, name):
        if name in self.names:
            return self.load(name)
        return super().get_command(ctx, name)
