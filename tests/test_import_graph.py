"""The library's imports form no cycle, and only its benchmarks import its comparators.

Every module of `lsm_gnn/` is parsed (ast, nothing imported) and every import it makes of another
`lsm_gnn` module is an edge: the module-level ones and, as well, the ones deferred into a function
(a cycle through a deferred import only waits for its first call; deferring is how one used to be
hidden). Imports under `if TYPE_CHECKING:` never run and are left out. stdlib `graphlib` finds the
cycle and names it.
"""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "lsm_gnn"


def modules(root: Path = ROOT, package: str = PACKAGE) -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, is a package's __init__)."""
    out = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return out


def _import_nodes(body):
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from _import_nodes(node.orelse)
        else:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.stmt):
                    yield from _import_nodes([child])
                elif isinstance(child, ast.ExceptHandler):
                    yield from _import_nodes(child.body)


def imported_names(name: str, path: Path, is_package: bool) -> list[tuple[str, int]]:
    """(absolute dotted name, line) of everything `name` imports, relative imports resolved;
    for `from a import b` both `a.b` and `a` are candidates (b may be a module or an attribute)."""
    out = []
    for node in _import_nodes(ast.parse(path.read_text(), str(path)).body):
        if isinstance(node, ast.Import):
            out += [(alias.name, node.lineno) for alias in node.names]
            continue
        base = node.module or ""
        if node.level:
            anchor = name.split(".") if is_package else name.split(".")[:-1]
            anchor = anchor[: len(anchor) - (node.level - 1)]
            base = ".".join(anchor + ([base] if base else []))
        out += [(f"{base}.{alias.name}", node.lineno) for alias in node.names]
    return out


def all_imports(mods: dict[str, tuple[Path, bool]]) -> dict[str, list[tuple[str, int]]]:
    return {name: imported_names(name, path, is_package) for name, (path, is_package) in mods.items()}


def import_graph(mods: dict[str, tuple[Path, bool]], imports=None) -> dict[str, set[str]]:
    """Module -> the library modules it imports (the longest dotted prefix that is a module)."""
    graph = {}
    for name, names in (imports or all_imports(mods)).items():
        deps = set()
        for target, _ in names:
            while target and target not in mods:
                target = target.rpartition(".")[0]
            if target and target != name:
                deps.add(target)
        graph[name] = deps
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as e:
        return e.args[1]
    return None


@pytest.fixture(scope="module")
def library():
    """(modules, what each imports, the import graph) of lsm_gnn/, parsed once."""
    mods = modules()
    imports = all_imports(mods)
    return mods, imports, import_graph(mods, imports)


def test_the_library_has_no_import_cycle(library):
    cycle = find_cycle(library[2])
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_walk_sees_a_cycle_through_a_deferred_import(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "contract.py").write_text("import numpy\n\ndef make():\n    from pkg.impl import Impl\n    return Impl()\n")
    (pkg / "impl.py").write_text("from .contract import make\n\nclass Impl:\n    pass\n")
    (pkg / "typed.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import impl\n")
    graph = import_graph(modules(tmp_path, "pkg"))
    assert graph["pkg.typed"] == set()   # TYPE_CHECKING imports never run
    assert sorted(find_cycle(graph)[:-1]) == ["pkg.contract", "pkg.impl"]


def test_the_feature_source_contract_imports_no_source(library):
    graph = library[2]
    # the errors and the counters' mixin, both implementation-free
    assert graph["lsm_gnn.sources.contract"] <= {"lsm_gnn.utils.errors", "lsm_gnn.utils.counts"}, graph["lsm_gnn.sources.contract"]
    assert graph["lsm_gnn.utils.counts"] == set()


def test_only_the_benchmarks_import_the_baselines(library):
    mods, imports, _ = library
    found = [f"{mods[name][0].relative_to(ROOT)}:{line} {target}" for name, names in imports.items()
             for target, line in names if target.split(".")[0] == "baselines" and not name.startswith(BENCH + ".")]
    assert not found, "the library imports its comparators: " + ", ".join(found)
    # and the harness finds them by an import this walk sees, not by a "module:attribute" string
    assert any(t.startswith("baselines.harness.") for t, _ in imports[BENCH + ".compare"]), imports[BENCH + ".compare"]


def lazy_targets(path: Path) -> list[tuple[str, str]]:
    """(verb, module) of every `"module:attribute"` string of a module's lazy command tables."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values):
                if isinstance(k, ast.Constant) and isinstance(v, ast.Constant) and isinstance(v.value, str) \
                        and ":" in v.value:
                    out.append((k.value, v.value.partition(":")[0]))
    return out


def test_every_bench_verb_is_a_command_of_the_bench_room(library):
    mods = library[0]
    verbs = lazy_targets(ROOT / PACKAGE / "cli" / "bench.py")
    assert {v for v, _ in verbs} >= {"storage", "device", "cache", "exchange", "multidevice", "train", "loader",
                                     "compare", "validate"}, verbs
    outside = [(v, m) for v, m in verbs if not m.startswith(BENCH + ".") or m not in mods]
    assert not outside, f"bench verbs loaded from outside {BENCH}/ (or from no module): {outside}"
    # the command table's other entries name a module that exists (the comparators' `run` included)
    for verb, module in lazy_targets(ROOT / PACKAGE / "cli" / "__init__.py"):
        assert module in mods or (ROOT / Path(*module.split("."))).with_suffix(".py").is_file(), (verb, module)


def test_no_engine_package_holds_a_benchmark_or_a_command(library):
    mods = library[0]
    found = [str(mods[name][0].relative_to(ROOT)) for name in mods
             if name.split(".")[1:2] and name.split(".")[1] in ENGINES
             and (name.rpartition(".")[2] == "cli" or "bench" in name.rpartition(".")[2])]
    assert not found, f"benchmarks and commands live in {BENCH}/ and the command rooms, not in an engine: {found}"


def test_no_engine_imports_a_benchmark(library):
    graph = library[2]
    # the commands load them (lsm_gnn/cli/bench.py, check gpu's steps); no engine, source or loop does
    found = [f"{name} -> {dep}" for name, deps in graph.items() for dep in deps
             if dep.startswith(BENCH + ".") and name.split(".")[1:2] not in (["bench"], ["cli"], ["check"])]
    assert not found, "a benchmark imported from below the harness: " + ", ".join(found)


def test_the_owner_rule_sits_on_the_bottom_floor(library):
    graph = library[2]
    # every engine, the simulator and the storage's row map call it: it imports only leaves (the error
    # type, the contract's id check for split_by_owner, the memcpy row scatter for the reorder)
    leaves = {"lsm_gnn.utils.errors", "lsm_gnn.sources.contract", "lsm_gnn.utils.native"}
    assert graph["lsm_gnn.ownership"] <= leaves, graph["lsm_gnn.ownership"]
    assert graph["lsm_gnn.utils.errors"] == set() and graph["lsm_gnn.utils.native"] == set()


def test_the_lists_of_accepted_values_import_nothing(library):
    # the config, the factories and the CLI read them: a leaf, so the config imports no implementation
    assert library[2]["lsm_gnn.choices"] == set()


# The floors of docs/architecture.md, bottom first: a module may import its own floor and the ones
# below. A room is a dotted path under lsm_gnn (the longest that matches wins); the benchmarks
# (`bench`, one module per subject) are harness and stand on the top floor, beside the commands
# (`check gpu` runs some of their functions as its steps), above every engine they measure.
FLOORS = [
    ("", "utils", "ownership", "choices", "sources.contract", "schemas", "configs",
     "testbed"),  # leaves (testbed: the stage-to-part table the emulation, projection and report read)
    ("datasets", "models"),
    ("storage", "sampling"),
    ("config", "accelerator",         # a run's configuration and emulated accelerator, and what
     "ranks.health", "ranks.group"),  # the exchange and the sources stamp: heartbeats, process group
    ("cache", "sim", "multidevice", "records"),  # what the sources are made of: the cache engine, the exchange
    ("sources",),                     # every feature source
    ("sources.factory",),             # above every source it builds
    ("train", "integrations", "ranks"),  # the loop and the ranks that run it (launch, spawn, workers)
    ("cli", "check", "project", "report",
     "bench",                         # every benchmark: `lsm-gnn bench <verb>` (lsm_gnn/cli/bench.py)
     "multidevice.launch"),           # the launcher's old path (README: torchrun -m lsm_gnn.multidevice.launch)
]
BENCH = f"{PACKAGE}.bench"
# the packages that hold the engines the benchmarks measure: no benchmark or command module in them
ENGINES = ("cache", "storage", "train", "multidevice", "integrations")
# Imports that run back up the floors today, each with its reason; the target is <= 2.
KNOWN_UP = {
    ("lsm_gnn.config", "lsm_gnn.cache.policies"),     # cache.policy's accepted names, from the registry
    ("lsm_gnn.cache", "lsm_gnn.sources.cached"),      # the old path lsm_gnn.cache.CachedFeatureSource (docs/cache.md)
}


def floor_of(name: str) -> int:
    rest = name.partition(".")[2]
    found = [(len(room), i) for i, rooms in enumerate(FLOORS) for room in rooms
             if rest == room or (room and rest.startswith(room + "."))]
    if not found:
        raise KeyError(f"{name} is on no floor of FLOORS (tests/test_import_graph.py)")
    return max(found)[1]


def imports_up_the_floors(library) -> set[tuple[str, str]]:
    mods, imports, graph = library
    return {(name, dep) for name, deps in graph.items() for dep in deps if floor_of(dep) > floor_of(name)}


def test_every_module_stands_on_a_floor(library):
    for name in library[0]:
        floor_of(name)


def test_no_new_import_runs_back_up_the_floors(library):
    up = imports_up_the_floors(library)
    assert up <= KNOWN_UP, "imports back up the floors: " + ", ".join(f"{a} -> {b}" for a, b in sorted(up - KNOWN_UP))
