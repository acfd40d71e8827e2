"""Policies from outside the package: a class named `package.module:Class` or
`path/to/file.py:Class`, or installed under the entry-point group `lsm_gnn.policies`.

This module only finds and imports such a class and checks that it is an EvictionPolicy; the
registry (`lsm_gnn.cache.policies.policy_class`, the one resolver every caller goes through:
the config's validation of cache.policy, `lsm-gnn simulate --policy`, every spawned rank when it
re-parses the config, Snakemake's jobs when they run the command with the config) registers it.
A file path is read relative to the working directory; the module it defines is put in
`sys.modules` under a name derived from its absolute path, so a second resolution in the same
process finds the same class and numba's on-disk cache of its hooks (keyed on the file) holds.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from pathlib import Path

from lsm_gnn.cache.policies.base import EvictionPolicy
from lsm_gnn.utils.errors import InputError

ENTRY_POINT_GROUP = "lsm_gnn.policies"
FORMS = "'package.module:Class' or 'path/to/file.py:Class'"


def is_spec(name: str) -> bool:
    """A name that names a class outside the registry (it holds a ':')."""
    return ":" in name


def _module_of_file(path: Path, spec: str):
    if not path.is_file():
        raise InputError(f"policy {spec!r}: no file {path} (expected {FORMS}; a path is read from the "
                         f"working directory {Path.cwd()})")
    mod_name = f"lsm_gnn_outside_policy_{path.stem}_{hashlib.sha1(str(path).encode()).hexdigest()[:10]}"
    if mod_name in sys.modules:
        return sys.modules[mod_name]
    mspec = importlib.util.spec_from_file_location(mod_name, path)
    if mspec is None or mspec.loader is None:
        raise InputError(f"policy {spec!r}: {path} is not a Python module (expected a .py file)")
    mod = importlib.util.module_from_spec(mspec)
    sys.modules[mod_name] = mod  # before executing it: numba and dataclasses look the module up
    try:
        mspec.loader.exec_module(mod)
    except Exception as e:
        del sys.modules[mod_name]
        raise InputError(f"policy {spec!r}: importing {path} failed: {type(e).__name__}: {e}") from e
    return mod


def import_policy_class(spec: str) -> type[EvictionPolicy]:
    """The EvictionPolicy subclass `spec` names (`module:Class` or `file.py:Class`), imported;
    InputError naming the module or file and what was expected otherwise."""
    where, _, cls_name = spec.rpartition(":")
    if not where or not cls_name.isidentifier():
        raise InputError(f"policy {spec!r}: expected {FORMS}, found {spec!r}")
    if where.endswith(".py") or "/" in where or "\\" in where:
        path = Path(where).expanduser().resolve()
        mod, what = _module_of_file(path, spec), str(path)
    else:
        if not all(part.isidentifier() for part in where.split(".")):
            raise InputError(f"policy {spec!r}: {where!r} is neither a module name nor a .py file (expected {FORMS})")
        try:
            mod = importlib.import_module(where)
        except ImportError as e:
            # a module name that is a file under the working directory (examples.policies.lfu from the
            # repository's root) imports only where that directory is on sys.path, which a console
            # script's is not: say so, and the path that works
            as_file = Path(*where.split(".")).with_suffix(".py")
            hint = (f"; {as_file} is here: name it as a path, {as_file}:{cls_name}, or run with "
                    f"PYTHONPATH=. (this directory)" if isinstance(e, ModuleNotFoundError) and as_file.is_file() else "")
            raise InputError(f"policy {spec!r}: cannot import module {where!r} ({e}; expected {FORMS}){hint}") from e
        what = f"module {where}"
    cls = getattr(mod, cls_name, None)
    if cls is None:
        found = sorted(n for n, v in vars(mod).items() if isinstance(v, type) and issubclass(v, EvictionPolicy)
                       and v is not EvictionPolicy)
        raise InputError(f"policy {spec!r}: {what} has no class {cls_name!r} (its EvictionPolicy classes: "
                         f"{found or 'none'})")
    if not (isinstance(cls, type) and issubclass(cls, EvictionPolicy)):
        raise InputError(f"policy {spec!r}: {what}:{cls_name} is not a subclass of "
                         f"lsm_gnn.cache.policies.EvictionPolicy (found {cls!r})")
    return cls


def entry_points() -> list:
    """The installed entry points of the group `lsm_gnn.policies` (name = value 'module:Class')."""
    from importlib import metadata

    return list(metadata.entry_points(group=ENTRY_POINT_GROUP))


def load_entry_point(ep) -> type[EvictionPolicy]:
    """The class an entry point of `lsm_gnn.policies` names, imported and checked."""
    try:
        cls = ep.load()
    except Exception as e:
        raise InputError(f"entry point {ep.name!r} = {ep.value!r} of group {ENTRY_POINT_GROUP!r}: importing it "
                         f"failed: {type(e).__name__}: {e}") from e
    if not (isinstance(cls, type) and issubclass(cls, EvictionPolicy)):
        raise InputError(f"entry point {ep.name!r} = {ep.value!r} of group {ENTRY_POINT_GROUP!r} is not a subclass "
                         f"of lsm_gnn.cache.policies.EvictionPolicy (found {cls!r})")
    return cls


__all__ = ["ENTRY_POINT_GROUP", "FORMS", "is_spec", "import_policy_class", "entry_points", "load_entry_point"]
