"""The library's imports form no cycle, every folder stands on one floor, and only the benchmarks
and the command line import the comparators.

Every module of `lsm_gnn/` and `baselines/` is parsed (ast, nothing imported) and every import it makes of another
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
COMPARATORS = "baselines"


def modules(root: Path = ROOT, *packages: str) -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, is a package's __init__), over `packages` (the library and its
    comparators when none is named)."""
    out = {}
    for path in sorted(p for package in (packages or (PACKAGE, COMPARATORS)) for p in (root / package).rglob("*.py")):
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
    assert graph["lsm_gnn.contract"] <= {"lsm_gnn.utils.errors", "lsm_gnn.utils.counts"}, graph["lsm_gnn.contract"]
    assert graph["lsm_gnn.utils.counts"] == set()


def test_only_the_benchmarks_and_the_command_line_import_the_baselines(library):
    mods, imports, _ = library
    found = [f"{mods[name][0].relative_to(ROOT)}:{line} {target}" for name, names in imports.items()
             for target, line in names if target.split(".")[0] == COMPARATORS
             and name.split(".")[0] == PACKAGE and room_of(name) not in ("bench", "cli")]
    assert not found, "the library imports its comparators: " + ", ".join(found)
    # the harness and the `run` command name them by imports this walk sees, not by strings
    assert any(t.startswith("baselines.harness.") for t, _ in imports[BENCH + ".compare"]), imports[BENCH + ".compare"]
    assert "baselines.cli" in library[2][PACKAGE + ".cli"], library[2][PACKAGE + ".cli"]


def test_every_command_and_bench_verb_is_loaded_by_an_import_the_walk_sees():
    from lsm_gnn.cli import COMMANDS, cli, command
    from lsm_gnn.cli.bench import BENCHES, bench, benchmark

    assert set(cli.list_commands(None)) == set(COMMANDS)
    for name in COMMANDS:
        assert command(name).name == name, name
    assert set(BENCHES) >= {"storage", "device", "cache", "exchange", "multidevice", "train", "loader", "compare",
                            "validate"}
    for name in BENCHES:
        loaded = benchmark(name)
        assert loaded.callback.__module__.startswith(BENCH + "."), (name, loaded.callback.__module__)
    assert set(bench.list_commands(None)) == set(BENCHES)


def test_no_engine_package_holds_a_benchmark_or_a_command(library):
    mods = library[0]
    found = [str(mods[name][0].relative_to(ROOT)) for name in mods
             if name.split(".")[0] == PACKAGE and room_of(name) in ENGINES
             and (name.rpartition(".")[2] == "cli" or "bench" in name.rpartition(".")[2])]
    assert not found, f"benchmarks and commands live in {BENCH}/ and the command rooms, not in an engine: {found}"


def test_no_engine_imports_a_benchmark(library):
    graph = library[2]
    # the commands load them (lsm_gnn/cli/bench.py, check gpu's steps); no engine, source or loop does
    found = [f"{name} -> {dep}" for name, deps in graph.items() for dep in deps
             if dep.startswith(BENCH + ".") and room_of(name) not in ("bench", "cli", "check")]
    assert not found, "a benchmark imported from below the harness: " + ", ".join(found)


def test_the_owner_rule_sits_on_the_bottom_floor(library):
    graph = library[2]
    # every engine, the simulator and the storage's row map call it: it imports only leaves (the error
    # type, the contract's id check for split_by_owner, the memcpy row scatter for the reorder)
    leaves = {"lsm_gnn.utils.errors", "lsm_gnn.contract", "lsm_gnn.utils.native"}
    assert graph["lsm_gnn.ownership"] <= leaves, graph["lsm_gnn.ownership"]
    assert graph["lsm_gnn.utils.errors"] == set() and graph["lsm_gnn.utils.native"] == set()


def test_the_lists_of_accepted_values_import_nothing(library):
    # the config, the factories and the CLI read them: a leaf, so the config imports no implementation
    assert library[2]["lsm_gnn.choices"] == set()
    # the metric vocabulary: the cache's replay, the simulator and the record read it alike
    assert library[2]["lsm_gnn.metrics"] == set()


# The floors of docs/architecture.md, bottom first. A room is a folder of lsm_gnn/ or one of its
# top-level modules (the comparators' package is one room), and every room stands on one floor: it
# may import rooms of its own floor and the floors below, never above, with no exception.
FLOORS = [
    ("", "utils", "choices", "metrics", "contract", "schemas", "configs",  # leaves: helpers, the accepted
     "testbed"),                        # values, the metric vocabulary, the feature-source contract,
                                        # the emulated testbed's stage-to-part table
    ("ownership", "datasets", "models"),  # the owner rule, the on-disk format, the models
    ("storage", "sampling"),            # feature stores and the storage device model; the sampler
    ("cache",),                         # the cache engine and its policies
    ("config",),                        # a run's configuration (the policies' names from the cache)
    ("accelerator", "sim", "multidevice"),  # the emulated accelerator, the simulator, the exchange
                                        # with its infrastructure (process group, heartbeats)
    ("records", "sources"),             # the run record; every feature source and their factory
    ("train", "project"),               # the loop and its loader; the projection
    ("ranks",),                         # the launcher: spawn, workers, merge, launch
    ("integrations",),                  # a user's DGL or PyG loader (the torchrun entry merges ranks)
    (COMPARATORS,),                     # the comparators, in lsm_gnn's harness and metrics
    ("bench", "check", "report"),       # every benchmark (one module per subject), the checks, reports
    ("cli",),                           # the `lsm-gnn` command and its table
]
BENCH = f"{PACKAGE}.bench"
# the packages that hold the engines the benchmarks measure: no benchmark or command module in them
ENGINES = ("cache", "storage", "train", "multidevice", "integrations")


def room_of(name: str) -> str:
    """The room of a module: its folder under lsm_gnn (or top-level module), or the comparators."""
    head, _, rest = name.partition(".")
    return COMPARATORS if head == COMPARATORS else rest.partition(".")[0]


def floor_of(name: str) -> int:
    room = room_of(name)
    found = [i for i, rooms in enumerate(FLOORS) if room in rooms]
    if not found:
        raise KeyError(f"{name}: its room {room!r} is on no floor of FLOORS (tests/test_import_graph.py)")
    return found[0]


def imports_up_the_floors(library) -> set[tuple[str, str]]:
    mods, imports, graph = library
    return {(name, dep) for name, deps in graph.items() for dep in deps if floor_of(dep) > floor_of(name)}


def test_every_room_stands_on_exactly_one_floor(library):
    rooms = [room for floor in FLOORS for room in floor]
    assert len(rooms) == len(set(rooms)), rooms
    for name in library[0]:
        floor_of(name)


def test_no_import_runs_back_up_the_floors(library):
    up = imports_up_the_floors(library)
    assert not up, "imports back up the floors: " + ", ".join(f"{a} -> {b}" for a, b in sorted(up))


def test_the_rooms_form_no_cycle(library):
    rooms = {}
    for name, deps in library[2].items():
        rooms.setdefault(room_of(name), set()).update(room_of(d) for d in deps if room_of(d) != room_of(name))
    cycle = find_cycle(rooms)
    assert cycle is None, "rooms import each other: " + " -> ".join(cycle)


def test_an_import_up_the_floors_is_found(tmp_path):
    # the check itself: a leaf that imports the launcher is named
    pkg = tmp_path / PACKAGE
    (pkg / "ranks").mkdir(parents=True)
    for f in ("__init__.py", "metrics.py", "ranks/__init__.py", "ranks/launch.py"):
        (pkg / f).write_text("")
    (pkg / "metrics.py").write_text("from lsm_gnn.ranks.launch import run_multi_device\n")
    mods = modules(tmp_path, PACKAGE)
    library = (mods, all_imports(mods), import_graph(mods))
    assert imports_up_the_floors(library) == {("lsm_gnn.metrics", "lsm_gnn.ranks.launch")}
