"""The owner rule (lsm_gnn.ownership): its functions agree with each other, with the numba kernels'
scalars and with the cache's set rule, and no other module of the package does owner arithmetic
on row ids itself."""

from __future__ import annotations

import ast
from pathlib import Path

import numba
import numpy as np
import pytest

from lsm_gnn import ownership as own
from lsm_gnn.utils.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
# names that hold an owner count (G) somewhere in the package
OWNER_COUNTS = {"G", "num_owners", "world", "world_size", "num_devices", "devices"}
# `% G` / `// G` that is not the owner rule on row ids: seeds, threads or bytes dealt among ranks
NOT_ROW_IDS = {
    ("lsm_gnn/cache/budget.py", "-feature_bytes // devices"),
    ("lsm_gnn/ranks/spawn.py", "(os.cpu_count() or 1) // world_size"),
    ("lsm_gnn/integrations/core.py", "len(self.seeds) // world_size"),
    ("lsm_gnn/sampling/sampler.py", "len(ids) // world_size"),
}


def _name(node) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Call):  # _i64(self.num_owners), int(G), np.int64(G)
        return _name(node.args[0]) if len(node.args) == 1 else None
    return None


def owner_arithmetic(root: Path = ROOT) -> list[str]:
    """`x % G` and `x // G` (G an owner count) in the package's code, outside ownership.py."""
    found = []
    for path in sorted((root / "lsm_gnn").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel == "lsm_gnn/ownership.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), rel)):
            ops = []
            if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mod, ast.FloorDiv)):
                ops.append((node.op, node.right, node))
            elif isinstance(node, ast.AugAssign) and isinstance(node.op, (ast.Mod, ast.FloorDiv)):
                ops.append((node.op, node.value, node))
            for _, right, whole in ops:
                if _name(right) in OWNER_COUNTS and (rel, ast.unparse(whole)) not in NOT_ROW_IDS:
                    found.append(f"{rel}:{whole.lineno} {ast.unparse(whole)}")
    return found


def test_no_module_but_ownership_computes_the_owner_rule():
    found = owner_arithmetic()
    assert not found, "owner arithmetic outside lsm_gnn/ownership.py: " + ", ".join(found)


def test_the_grep_sees_owner_arithmetic_in_every_form(tmp_path):
    pkg = tmp_path / "lsm_gnn"
    pkg.mkdir()
    (pkg / "ownership.py").write_text("def f(v, G):\n    return v % G\n")
    (pkg / "bad.py").write_text("def f(ids, self, G):\n    a = ids % self.world_size\n    b = ids[3] // G\n"
                                "    c = (ids // int(num_owners)) % 8\n    ids %= world\n")
    found = owner_arithmetic(tmp_path)
    assert sorted(f.split(" ", 1)[0] for f in found) == ["lsm_gnn/bad.py:2", "lsm_gnn/bad.py:3", "lsm_gnn/bad.py:4",
                                                   "lsm_gnn/bad.py:5"]


def test_owner_local_row_and_global_row_partition_the_rows():
    rng = np.random.default_rng(0)
    for G in (1, 2, 3, 7):
        n = int(rng.integers(1, 500))
        ids = np.arange(n)
        owner, local = own.owner_of(ids, G), own.local_row(ids, G)
        assert np.array_equal(own.global_row(local, owner, G), ids)
        assert own.local_rows(n, G) == local.max() + 1
        for o in range(G):
            rows = own.rows_of_owner(n, G, o)
            assert np.array_equal(rows, ids[owner == o])
            assert own.owned_count(n, G, o) == len(rows)
            assert np.array_equal(own.local_row(rows, G), np.arange(len(rows)))
            assert np.array_equal(ids[own.owner_slice(o, G)], rows)
            if len(rows) > 2:
                assert np.array_equal(ids[own.owner_slice(o, G, 1, len(rows) - 1)], rows[1:-1])
        assert sum(own.owned_count(n, G, o) for o in range(G)) == n
    assert own.local_rows(0, 3) == 0


def test_the_numba_scalars_are_the_same_rule_inside_and_outside_a_kernel():
    @numba.njit
    def both(ids, G):
        out = np.empty((2, len(ids)), np.int64)
        for i in range(len(ids)):
            out[0, i] = own.owner_of_id(ids[i], G)
            out[1, i] = own.local_row_of_id(ids[i], G)
        return out

    ids = np.random.default_rng(1).integers(0, 10**9, 1000)
    for G in (1, 2, 5):
        got = both(ids, np.int64(G))
        assert np.array_equal(got[0], own.owner_of(ids, G))
        assert np.array_equal(got[1], own.local_row(ids, G))
        assert own.local_row_of_id.py_func(int(ids[0]), G) == got[1, 0]


def test_the_cache_set_of_a_row_is_its_local_row_then_the_set_rule():
    from lsm_gnn.cache.reference import ReferenceCache

    G, sets = 3, 5
    ids = np.arange(200)
    ref = ReferenceCache.__new__(ReferenceCache)
    ref.num_owners, ref.num_sets = G, sets
    assert [ref.set_of(int(v)) for v in ids] == list(own.local_row(ids, G) % sets)


def test_ids_of_another_owner_are_an_error_naming_the_id_and_both_owners():
    own.check_owned(np.array([1, 4, 7]), 3, 1)
    own.check_owned(np.array([5, 6]), 1, 0)
    own.check_owned(np.array([], np.int64), 3, 2)
    with pytest.raises(InputError, match=r"ids: id 5 belongs to owner 2, not owner 1 of 3"):
        own.check_owned(np.array([1, 4, 5, 8]), 3, 1)
    assert np.array_equal(own.foreign_ids(np.array([0, 1, 2, 3]), 2, 0), [False, True, False, True])
