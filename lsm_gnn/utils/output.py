"""What a bench command does with its result object: the one rule for --output and --json."""

from __future__ import annotations

import json

from lsm_gnn.utils.atomic import write_json


def emit(obj: dict, output: str | None, as_json: bool, default=str) -> bool:
    """Write `obj` to `output` (atomically) where given; print it as one JSON object with
    `as_json`. True when it was printed (the caller prints its table otherwise)."""
    if output:
        write_json(output, obj)
    if as_json:
        print(json.dumps(obj, default=default), flush=True)
    return bool(as_json)
