"""Counters as dataclasses of numbers: what the tier counters and the I/O counters share."""

from __future__ import annotations

from dataclasses import asdict


class Counts:
    """Mixin for a dataclass whose fields are counts: add another's, read as a dict, zero them."""

    def add(self, other) -> None:
        for k, v in asdict(other).items():
            setattr(self, k, getattr(self, k) + v)

    def as_dict(self) -> dict:
        return asdict(self)

    def reset(self) -> None:
        for k, v in asdict(self).items():
            setattr(self, k, type(v)())

    def snapshot(self):
        return type(self)(**asdict(self))
