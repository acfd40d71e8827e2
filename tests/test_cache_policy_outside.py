"""A policy of your own in one file, without editing the package: examples/policies/lfu.py is named
`path/to/file.py:Class` (or `package.module:Class`) wherever a policy name is resolved (the config's
validation, `lsm-gnn simulate --policy`, a spawned process that re-parses the config), or installed
under the entry-point group `lsm_gnn.policies`; it keeps its own state slots; it makes an LFU's
decisions; the GPU engine refuses it, naming what it lacks, before any CUDA is needed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from lsm_gnn.cache import policies
from lsm_gnn.cache.engine import CpuCacheEngine, HIT
from lsm_gnn.cache.policies import EvictionPolicy, StateSlot
from lsm_gnn.cache.reference import ReferenceCache
from lsm_gnn.config import config_to_dict, parse_config
from lsm_gnn.utils.errors import ConfigError, InputError

from engine_args import engine_kwargs

ROOT = Path(__file__).resolve().parents[1]
LFU_FILE = ROOT / "examples" / "policies" / "lfu.py"
SPEC = f"{LFU_FILE}:LFU"


@pytest.fixture(autouse=True, scope="module")
def _forget_outside_policies():
    """Every outside policy this module registers is gone after it: the other modules' CPU kernels
    keep the registry (and so the compiled dispatch) they expect."""
    before = set(policies.REGISTRY)
    yield
    for name in set(policies.REGISTRY) - before:
        policies.unregister_policy(name)


def _lfu_by_hand(batches, ways):
    """An LFU of one fully associative set, written here from the rule alone: per batch, every
    distinct id is looked up first (a hit adds one to its line's count), then the misses in order
    of first occurrence fill the lowest free way, else replace the line of fewest hits since its
    fill, ties to the earliest fill iteration, then the lowest way. Returns, per batch, the ids
    evicted (in miss order) and the hit ids."""
    lines = [None] * ways  # way -> [key, hits, fill iteration]
    out = []
    for t, batch in enumerate(batches):
        distinct = list(dict.fromkeys(batch))
        resident = {ln[0]: ln for ln in lines if ln is not None}
        hits = [v for v in distinct if v in resident]
        for v in hits:
            resident[v][1] += 1
        evicted = []
        for v in distinct:
            if v in resident:
                continue
            if None in lines:
                way = lines.index(None)
            else:
                way = min(range(ways), key=lambda w: (lines[w][1], lines[w][2], w))
                evicted.append(lines[way][0])
            lines[way] = [v, 0, t]
        out.append((evicted, hits))
    return out


# a hand-built trace of one set of 4 ways (ids fill ways 0-3 in order), built so that every part of
# the rule decides somewhere: at t = 2 ids 2, 3, 4 have no hit and the same fill: the lowest ways
# go (2, then 3); at t = 3 the oldest fill goes although it sits in the highest way (4, not 5);
# at t = 11 a duplicate counts one hit; at t = 13 ids 1, 8 and 15 are tied at 2 hits and the
# oldest fill goes (1). LRU would evict 1 at t = 2; FIFO would evict 1 at t = 2 as well.
TRACE = [[1, 2, 3, 4], [1], [5, 6], [7], [8], [6, 9], [1, 6, 8, 10], [11, 12], [13], [6], [14, 15], [15, 15, 8],
         [15], [16]]


def test_the_outside_lfu_evicts_as_an_lfu_computed_in_the_test_does():
    expected = _lfu_by_hand(TRACE, ways=4)
    # the test's own LFU takes the choices the trace was built for (see TRACE)
    assert [expected[t][0] for t in (2, 3, 13)] == [[2, 3], [4], [1]] and expected[11][1] == [15, 8]
    kw = engine_kwargs(policy=SPEC, ways=4, window=0, victim_depth=1)
    static = np.zeros(32, np.uint8)
    cpu, ref = CpuCacheEngine(4, 32, static, **kw), ReferenceCache(4, 32, static, **kw)
    assert cpu.policy_name == "lfu" and ref.policy.name == "lfu"
    for t, batch in enumerate(TRACE):
        b = np.asarray(batch, np.int64)
        res = cpu.step(b, np.zeros(0, np.int64), np.zeros(1, np.int64))
        rec = ref.step(batch, [])
        evicted, hits = expected[t]
        assert [e for e in res.evicted.tolist() if e >= 0] == evicted, t
        assert [v for v, s in zip(res.distinct.tolist(), res.status.tolist()) if s == HIT] == hits, t
        assert [e for e in rec.evicted if e >= 0] == evicted, t
        cpu.end_iteration()
        ref.end_iteration()
    assert sum(len(e) for e, _ in expected) >= 6  # the victim hook decided often


def test_a_policy_with_state_slots_gets_its_own_arrays_and_the_others_get_empty_ones():
    kw = engine_kwargs(policy=SPEC, ways=4, window=0, victim_depth=1)
    eng = CpuCacheEngine(8, 32, np.zeros(32, np.uint8), **kw)
    hits, filled = eng.policy_state["lfu.hits"], eng.policy_state["lfu.filled"]
    assert hits.shape == (8,) and hits.dtype == np.int64 and filled.shape == (8,)
    assert all(eng.policy_state[n].size == 0 for n in policies.STATE_ORDER)  # no built-in state kept
    eng.step(np.array([1, 2], np.int64), np.zeros(0, np.int64), np.zeros(1, np.int64))
    eng.end_iteration()
    eng.step(np.array([1], np.int64), np.zeros(0, np.int64), np.zeros(1, np.int64))
    assert hits.sum() == 1 and filled.max() == 1  # one hit counted; fills stamped t + 1 = 1
    lru = CpuCacheEngine(8, 32, np.zeros(32, np.uint8), **engine_kwargs(policy="lru", ways=4, window=0,
                                                                        victim_depth=1))
    assert lru.policy_state["lfu.hits"].size == 0 and lru.policy_state["stamp"].size == 8


def test_a_policy_file_name_resolves_in_the_config_validation_and_is_kept_as_written():
    cfg = parse_config({"cache": {"policy": SPEC}})
    assert cfg.cache.policy == SPEC  # a rank that re-parses the config resolves it again
    assert policies.policy_class(SPEC).name == "lfu" and "lfu" in policies.configurable_names()
    assert policies.resolve_policy(SPEC, pvp=True) == "lfu"


def test_a_spawned_process_that_reparses_the_config_runs_the_outside_policy(tmp_path):
    """As a rank does (lsm_gnn.ranks.spawn: config_to_dict in, parse_config out) in a fresh
    interpreter, where nothing registered the policy: it resolves and runs with the same decisions."""
    cfg = parse_config({"cache": {"policy": SPEC, "ways": 4, "window": 2}})
    batches = [list(map(int, np.random.default_rng(t).integers(0, 40, 12))) for t in range(12)]
    child = (
        "import json, sys\n"
        "from lsm_gnn.config import parse_config\n"
        "from lsm_gnn.cache.policies import policy_class\n"
        "from lsm_gnn.cache.reference import ReferenceCache\n"
        "from lsm_gnn.cache.engines import engine_settings\n"
        "from lsm_gnn.cache.budget import MemoryBudget\n"
        "d = json.load(sys.stdin)\n"
        "cfg = parse_config(d['config'])\n"
        "kw = engine_settings(cfg.cache, MemoryBudget(0, 4, cfg.cache.window, 1, 1))\n"
        "ref = ReferenceCache(8, 40, [0] * 40, **kw)\n"
        "print(json.dumps({'name': policy_class(cfg.cache.policy).name,\n"
        "                  'rows': ref.replay(d['batches']).tolist()}))\n")
    payload = json.dumps({"config": config_to_dict(cfg), "batches": batches})
    out = subprocess.run([sys.executable, "-c", child], input=payload, capture_output=True, text=True,
                         cwd=tmp_path, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    from lsm_gnn.cache.budget import MemoryBudget
    from lsm_gnn.cache.engines import engine_settings

    kw = engine_settings(cfg.cache, MemoryBudget(0, 4, cfg.cache.window, 1, 1))
    assert got == {"name": "lfu", "rows": ReferenceCache(8, 40, [0] * 40, **kw).replay(batches).tolist()}


def test_simulate_runs_a_policy_named_by_its_file_beside_the_built_in_ones(random_dataset):
    from lsm_gnn.cli import cli

    ds = random_dataset(num_nodes=300, dim=4)
    args = ["simulate", str(ds.root), "--policy", SPEC, "--policy", "lru", "--policy", "all", "--batch-size", "32",
            "--max-batches", "5", "--json", "--no-progress"]
    out = CliRunner().invoke(cli, args)
    assert out.exit_code == 0, out.output
    summary = json.loads(out.output)
    ran = [r["policy"] for r in summary["results"]]
    assert ran[:2] == [SPEC, "lru"] and "lfu" not in ran and "hybrid" in ran  # 'all' adds no second LFU
    lfu_rows = summary["storage_rows_vs_min"][SPEC]
    assert lfu_rows >= 1.0  # MIN is a floor
    # the CPU engine's LFU (numba hooks) and the reference engine's (Python hooks) agree
    ref = CliRunner().invoke(cli, args[:2] + ["--policy", SPEC] + args[8:] + ["--engine", "reference"])
    assert ref.exit_code == 0, ref.output
    assert json.loads(ref.output)["results"][0]["storage_rows"] == summary["results"][0]["storage_rows"]


def test_a_policy_name_that_names_nothing_says_which_file_or_name_and_what_was_expected(tmp_path):
    cases = [
        (f"{tmp_path / 'absent.py'}:LFU", ["absent.py", "no file"]),
        (f"{LFU_FILE}:Lfu", ["lfu.py", "no class 'Lfu'", "LFU"]),
        (f"{LFU_FILE}:StateSlot", ["not a subclass", "EvictionPolicy"]),
        ("no_such_pkg_for_policies.mod:LFU", ["cannot import module 'no_such_pkg_for_policies.mod'"]),
        ("lfu.py:", ["expected 'package.module:Class' or 'path/to/file.py:Class'"]),
        ("leastfrequent", ["unknown eviction policy 'leastfrequent'", "lsm_gnn.policies", "path/to/file.py:Class"]),
    ]
    for name, parts in cases:
        with pytest.raises(InputError) as err:
            policies.policy_class(name)
        for part in parts:
            assert part in str(err.value), (name, part, str(err.value))
    # a module name that is a file of the working directory, not importable from here: the path that works
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "pol.py").write_text("")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(tmp_path)
        mp.setattr(sys, "path", [p for p in sys.path if p not in ("", ".", str(tmp_path))])  # as a console script's
        with pytest.raises(InputError) as err:
            policies.policy_class("mine.pol:MyPolicy")
    assert "cannot import module 'mine.pol'" in str(err.value) and "mine/pol.py:MyPolicy" in str(err.value)
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('half written')\n")
    with pytest.raises(InputError, match=r"importing .*broken\.py failed: RuntimeError: half written"):
        policies.policy_class(f"{broken}:Anything")
    with pytest.raises(ConfigError, match="cache.policy") as err:  # the config names its key
        parse_config({"cache": {"policy": f"{tmp_path / 'absent.py'}:LFU"}})
    assert "absent.py" in str(err.value)


def test_the_gpu_engine_names_the_missing_cuda_hooks_before_it_needs_cuda():
    from lsm_gnn.cache.gpu_engine import GpuCacheEngine

    lfu = policies.policy_class(SPEC)
    class LfuCpuOnly(lfu):  # the same LFU without its CUDA hooks
        name = "lfu_cpu_only_test"
        cuda_source = None

    cpu_only = policies.register_policy(LfuCpuOnly)
    try:
        # it runs on the CPU engine ...
        CpuCacheEngine(8, 32, np.zeros(32, np.uint8), **engine_kwargs(policy=cpu_only.name, ways=4, window=0,
                                                                      victim_depth=1))
        # ... and the GPU engine says what it lacks (this machine may have no CuPy: the error comes first)
        with pytest.raises(InputError) as err:
            GpuCacheEngine(8, 32, np.zeros(32, np.uint8), **engine_kwargs(policy=cpu_only.name, ways=4, window=0,
                                                                          victim_depth=1))
    finally:
        policies.unregister_policy(cpu_only.name)
    msg = str(err.value)
    for part in ("'lfu_cpu_only_test'", "test_cache_policy_outside", "cannot run on the GPU engine", "cuda_source",
                 "lfu_cpu_only_test_victim_key", "cache.engine=cpu"):
        assert part in msg, (part, msg)


def test_the_outside_lfu_makes_the_cpu_engine_s_decisions_on_the_emulated_gpu_engine(monkeypatch):
    """Its `cuda_source` and slots compiled into the GPU engine's one module (on tests/cuda_emu.py,
    the host compiler's stand-in for CuPy), step by step against the CPU engine."""
    if shutil.which("g++") is None:
        pytest.skip("needs g++ for the CUDA emulator")
    from cuda_emu import fake_cupy
    from lsm_gnn.cache import gpu_codegen, gpu_engine

    lfu = policies.policy_class(SPEC)
    assert lfu in gpu_codegen.gpu_policies()
    source = gpu_codegen.module_source()
    assert "long long* lfu_hits, long long* lfu_filled" in source and "case POLICY_LFU: return lfu_victim_key" in source
    cp = fake_cupy()
    mod = cp.RawModule(code=source)
    monkeypatch.setattr(gpu_engine, "_cupy", lambda: cp)
    monkeypatch.setattr(gpu_engine, "_module", lambda: mod)
    rng = np.random.default_rng(7)
    hot = rng.choice(600, 40, replace=False)
    batches = [np.concatenate([rng.choice(600, 60), rng.choice(hot, 40)]).astype(np.int64) for _ in range(8)]
    static = rng.integers(0, 256, 600).astype(np.uint8)
    kw = engine_kwargs(policy=SPEC, ways=8, window=3, victim_depth=8)
    g, c = gpu_engine.GpuCacheEngine(64, 600, static, **kw), CpuCacheEngine(64, 600, static, **kw)
    evictions = 0
    for t, b in enumerate(batches):
        nxt = batches[t + 1: t + 4]
        ids = np.concatenate(nxt) if nxt else np.zeros(0, np.int64)
        offsets = np.concatenate([[0], np.cumsum([len(x) for x in nxt])]).astype(np.int64)
        rg, rc = g.step(b, ids, offsets), c.step(b, ids, offsets)
        for f in ("distinct", "status", "slot", "evicted", "spill"):
            np.testing.assert_array_equal(np.asarray(getattr(rg, f).get()), getattr(rc, f), err_msg=f"{t}: {f}")
        evictions += rc.counts["evictions"]
        assert g.end_iteration() == c.end_iteration()
        for name in ("lfu.hits", "lfu.filled"):
            np.testing.assert_array_equal(np.asarray(g.policy_state[name].get()), c.policy_state[name], err_msg=name)
    assert evictions > 50 and c.policy_state["lfu.hits"].sum() > 0


def test_slots_that_are_not_state_slots_or_beside_built_in_state_are_refused():
    class BadSlots(EvictionPolicy):
        name = "bad_slots_test"
        slots = {"count": (np.int64, "line", 0)}

        def victim(self, state, lines, t, window):
            return 0

    class Both(BadSlots):
        name = "both_state_test"
        slots = {"count": StateSlot(np.int64)}
        state = ("stamp",)

    for cls, match in ((BadSlots, "StateSlot"), (Both, "one of them")):
        with pytest.raises(InputError, match=match):
            policies.register_policy(cls)
        assert cls.name not in policies.REGISTRY
    with pytest.raises(InputError, match="per"):
        StateSlot(np.int64, "way")


def test_the_entry_point_group_adds_installed_policies_to_all(tmp_path, monkeypatch):
    (tmp_path / "installed_policy_pkg.py").write_text(
        "from lsm_gnn.cache.policies import EvictionPolicy\n"
        "class Oldest(EvictionPolicy):\n"
        "    name = 'oldest_way_installed'\n"
        "    def victim(self, state, lines, t, window):\n"
        "        return 0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    ep = metadata.EntryPoint(name="oldest_way_installed", value="installed_policy_pkg:Oldest",
                             group="lsm_gnn.policies")
    seen = []

    def fake_entry_points(**kw):
        seen.append(kw)
        return [ep] if kw.get("group") == "lsm_gnn.policies" else []

    monkeypatch.setattr(metadata, "entry_points", fake_entry_points)
    from lsm_gnn.cli.simulate import _chosen_policies

    chosen = _chosen_policies(["all"])
    assert {"group": "lsm_gnn.policies"} in seen
    assert "oldest_way_installed" in chosen and {"hybrid", "lru", "sieve"} <= set(chosen)
    assert policies.policy_class("oldest_way_installed").__name__ == "Oldest"
    policies.unregister_policy("oldest_way_installed")
    # a plain name that only an installed entry point holds resolves too (the config's validation)
    assert parse_config({"cache": {"policy": "oldest_way_installed"}}).cache.policy == "oldest_way_installed"
