"""Validated YAML files: a packaged name or a path, loaded into a pydantic model.

One loader for every profile kind (hardware profiles of the projection, accelerator profiles of the
emulation): an unknown key, a missing one, a wrong type or a value out of range is a `ConfigError`
naming the file and the dotted key.
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml
from pydantic import BaseModel, ValidationError

from lsm_gnn.utils.errors import ConfigError


def yaml_path(name_or_path: str | os.PathLike, folder: Path) -> Path:
    """A packaged file `<folder>/<name>.yaml` by name, or the path itself."""
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or p.exists():
        return p
    return folder / f"{name_or_path}.yaml"


def _key(loc) -> str:
    return ".".join(str(x) for x in loc if not (isinstance(x, str) and x.startswith("function-"))) or "(root)"


def parse_model(model: type[BaseModel], data, source: str, what: str = "a profile"):
    """`data` validated as `model`; the first problem (and how many more) named by its dotted key.
    Cross-field checks raise `ValueError("dotted.key: problem")` and are reported under that key."""
    if not isinstance(data, dict):
        raise ConfigError(source, "(root)", f"{what} is a mapping of sections, found {type(data).__name__}")
    try:
        return model.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        key, msg = _key(err["loc"]), err["msg"]
        if err["type"] == "missing":
            msg = "required key is missing"
        elif err["type"] == "extra_forbidden":
            msg = "unknown key"
        elif err["type"] == "value_error" and msg.startswith("Value error, "):
            k, _, rest = msg[len("Value error, "):].partition(": ")
            key, msg = k, rest
        n = len(e.errors())
        raise ConfigError(source, key, msg + (f" (and {n - 1} more problem{'s' if n > 2 else ''})" if n > 1 else "")) \
            from None


def load_model(model: type[BaseModel], name_or_path: str | os.PathLike, folder: Path, packaged: tuple[str, ...],
               what: str = "profile"):
    """A packaged YAML file by name (one of `packaged`, in `folder`) or any YAML file by path, validated."""
    path = yaml_path(name_or_path, folder)
    source = path.name if str(name_or_path) in packaged else os.fspath(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ConfigError(os.fspath(name_or_path), "(file)",
                          f"no such {what} file; packaged {what}s: {', '.join(packaged)}") from None
    except OSError as e:
        raise ConfigError(source, "(file)", f"cannot read: {e.strerror or e}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        raise ConfigError(source, "(yaml)", f"not valid YAML: {where}{getattr(e, 'problem', None) or e}") from None
    return parse_model(model, data, source, f"a {what}")
