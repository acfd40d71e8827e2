"""Validated YAML files: a packaged name or a path, loaded into a pydantic model.

One loader for every profile kind (hardware profiles of the projection, accelerator profiles of the
emulation): an unknown key, a missing one, a wrong type or a value out of range is a `ConfigError`
naming the file and the dotted key. `key=value` overrides (the command line's `--set`) are set in
the YAML document before it is validated, their values parsed by the same bounded loader.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from lsm_gnn.utils.errors import ConfigError

MAX_VALUES = 100_000
"""Values a YAML document may hold once its aliases are expanded: a config or a profile has a few
hundred; a document of a few hundred bytes with nested aliases expands to billions (and hung the
validator for minutes), so anything beyond this bound is refused before it is built."""

_MERGE = "tag:yaml.org,2002:merge"


class _Refused(ValueError):
    def __init__(self, key: str, problem: str):
        self.key = key
        super().__init__(problem)


def _walk(node, path: tuple, memo: dict, active: set, bound: int) -> int:
    """Values `node` holds with every alias expanded (a shared node counted each time it is used),
    refusing past `bound`; a key given twice in one mapping (PyYAML keeps the last) refused too,
    by its dotted path and both lines."""
    key = id(node)
    if key in memo:
        return memo[key]
    where = ".".join(path) or "(root)"
    if key in active:
        raise _Refused(where, f"line {node.start_mark.line + 1}: an alias refers to a value that contains it")
    active.add(key)
    n = 1
    if isinstance(node, yaml.SequenceNode):
        for i, child in enumerate(node.value):
            n += _walk(child, path + (str(i),), memo, active, bound)
            if n > bound:
                break
    elif isinstance(node, yaml.MappingNode):
        seen: dict = {}
        for k, v in node.value:
            if isinstance(k, yaml.ScalarNode) and k.tag != _MERGE:
                line = k.start_mark.line + 1
                if k.value in seen:
                    raise _Refused(".".join(path + (shorten(k.value),)),
                                   f"duplicate key: given on line {seen[k.value]} and again on line {line}")
                seen[k.value] = line
            name = shorten(k.value, 40) if isinstance(k, yaml.ScalarNode) else "(key)"
            n += _walk(k, path, memo, active, bound) + _walk(v, path + (name,), memo, active, bound)
            if n > bound:
                break
    active.discard(key)
    memo[key] = n
    if n > bound:
        raise _Refused(where, f"line {node.start_mark.line + 1}: aliases expand this value to more than "
                              f"{bound:,} values")
    return n


def shorten(value, limit: int = 80) -> str:
    """`value` as text for a message, cut to `limit` characters (a message never echoes a huge value)."""
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


def load_yaml(text: str, source: str, *, bound: int = MAX_VALUES):
    """`text` parsed as YAML (safe tags only) for `source`; a ConfigError naming `source` for text
    that is not YAML, a key given twice in one mapping (both lines named) or aliases that expand to
    more than `bound` values (refused before anything is built)."""
    loader = None
    try:
        loader = yaml.SafeLoader(text)
        node = loader.get_single_node()
        if node is None:
            return None
        try:
            _walk(node, (), {}, set(), bound)
        except _Refused as e:
            raise ConfigError(source, e.key, str(e)) from None
        return loader.construct_document(node)
    except (yaml.YAMLError, RecursionError) as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        what = getattr(e, "problem", None) or e
        raise ConfigError(source, "(yaml)", f"not valid YAML: {where}{shorten(str(what), 300)}") from None
    finally:
        if loader is not None:
            loader.dispose()


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
    data = load_yaml(text, source)
    return parse_model(model, data, source, f"a {what}")


def apply_overrides(data: dict, overrides: list[str] | dict, source: str = "<overrides>") -> dict:
    """Set dotted keys in a nested dict; `a.b=1` strings are parsed as YAML scalars."""
    if not isinstance(data, dict):
        raise ConfigError(source, "(root)", f"expected a mapping to set keys in, found {type(data).__name__}")
    data = copy.deepcopy(data)
    items = overrides.items() if isinstance(overrides, dict) else (_split(o, source) for o in overrides)
    for key, value in items:
        node = data
        parts = key.split(".")
        if not all(parts):
            raise ConfigError(source, key or "(key)", "expected a dotted key such as sampler.batch_size")
        for p in parts[:-1]:
            nxt = node.setdefault(p, {})
            if not isinstance(nxt, dict):
                raise ConfigError(source, key, f"{p} is not a section")
            node = nxt
        node[parts[-1]] = value
    return data


def _split(item: str, source: str) -> tuple[str, Any]:
    if "=" not in item:
        raise ConfigError(source, item, "override must look like key=value")
    k, v = item.split("=", 1)
    try:
        return k.strip(), load_yaml(v, source)
    except ConfigError as e:
        raise ConfigError(source, k.strip() or "(key)",
                          f"value {shorten(repr(v))} is not a YAML value: {e.problem}") from None
