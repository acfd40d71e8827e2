"""The GPU cache engine makes the CPU engine's decisions, with the same state and counters.

Every equality test runs on two backends:

* ``cupy``: GpuCacheEngine on CuPy and a real GPU (marked ``gpu``: skipped cleanly without
  one; `lsm-gnn check gpu` runs them on a GPU machine);
* ``emulated``: the same engine and the same CUDA sources, compiled for the host by
  tests/cuda_emu.py (g++), so the kernels' logic and the engine's host code are checked on every
  machine; skipped without a C++ compiler.

The rest needs neither: the sources define every kernel the engine launches, the constants the
kernels are compiled with are the Python ones, and a missing GPU is a clear error.
"""

from __future__ import annotations

import re
import shutil

import numpy as np
import pytest

from lsm_gnn.cache.budget import budget_for_cache_rows
from lsm_gnn.cache import engine as cpu_engine
from lsm_gnn.cache import gpu_codegen, gpu_engine, policies, window
from lsm_gnn.cache.engine import CpuCacheEngine
from lsm_gnn.cache.geometry import cache_geometry
from lsm_gnn.cache.window import ROW_SLOT
from lsm_gnn.utils import cuda_sources, rowcopy
from lsm_gnn.utils.errors import InputError

STEP_FIELDS = ("distinct", "inverse", "status", "slot", "src", "evicted", "spill", "spill_slot",
               "spill_dst")
STATE = ("keys", "pagerank", "tag", "stamp", "visited", "newer", "older", "set_fill", "rr", "head",
         "tail", "hand")
from engine_args import POLICIES, engine_kwargs

_has_cxx = bool(shutil.which("g++") or shutil.which("c++"))
BACKENDS = [
    pytest.param("cupy", marks=pytest.mark.gpu),
    pytest.param("emulated", marks=pytest.mark.skipif(not _has_cxx, reason="needs g++ for the CUDA emulator")),
]
# problem sizes: the emulator runs a warp as 32 coroutines, so it gets a small cache
SIZES = {
    "cupy": dict(num_rows=60000, capacity=4096, ways=32, batches=14, batch=5000, window=8, depth=96),
    "emulated": dict(num_rows=1200, capacity=96, ways=8, batches=9, batch=160, window=4, depth=8),
}


# ---- backends ---------------------------------------------------------------------------------
_EMU: dict = {}


@pytest.fixture
def backend(request, monkeypatch):
    """Name of the backend; for "emulated", gpu_engine runs on tests/cuda_emu.py."""
    name = request.param
    if name == "emulated":
        from cuda_emu import fake_cupy

        if not _EMU:
            _EMU["cp"] = fake_cupy()
            _EMU["mod"] = _EMU["cp"].RawModule(code=gpu_codegen.module_source())
        monkeypatch.setattr(gpu_engine, "_cupy", lambda: _EMU["cp"])
        monkeypatch.setattr(gpu_engine, "_module", lambda: _EMU["mod"])
    return name


def host(a) -> np.ndarray:
    return np.asarray(a.get()) if hasattr(a, "get") else np.asarray(a)


def engines(size: dict, **kw):
    args = (kw.pop("capacity", size["capacity"]), size["num_rows"], kw.pop("static"))
    kw.setdefault("ways", size["ways"])
    kw.setdefault("window", size["window"])
    kw.setdefault("victim_depth", size["depth"])
    kw = engine_kwargs(**kw)
    return gpu_engine.GpuCacheEngine(*args, **kw), CpuCacheEngine(*args, **kw)


# ---- traces -----------------------------------------------------------------------------------
def mixed_trace(rng, size: dict, num_owners: int = 1, owner: int = 0) -> list[np.ndarray]:
    """Uniform requests, a hot set that hits, and a narrow band that overloads a few sets."""
    owned = np.arange(owner, size["num_rows"], num_owners)
    hot = rng.choice(owned, max(8, len(owned) // 25), replace=False)
    band = owned[: max(16, len(owned) // 10)]
    n = size["batch"]
    out = []
    for _ in range(size["batches"]):
        b = np.concatenate([rng.choice(owned, n // 2), rng.choice(hot, n // 4), rng.choice(band, n - n // 2 - n // 4)])
        rng.shuffle(b)
        out.append(b.astype(np.int64))
    return out


def one_set_trace(rng, size: dict, sets: int) -> list[np.ndarray]:
    """Adversarial: every request maps to set 0 (far more misses than ways), with duplicates."""
    same_set = np.arange(0, size["num_rows"], sets)
    pool = same_set[: 6 * size["ways"]]
    return [rng.choice(pool, size["batch"] // 2).astype(np.int64) for _ in range(size["batches"])]


def window_of(batches, t: int, w: int):
    nxt = batches[t + 1: t + 1 + w]
    offsets = np.zeros(len(nxt) + 1, np.int64)
    np.cumsum([len(b) for b in nxt], out=offsets[1:])
    ids = np.concatenate(nxt) if nxt else np.zeros(0, np.int64)
    return ids, offsets


# ---- comparisons ------------------------------------------------------------------------------
def assert_same_step(rg, rc, t: int) -> None:
    for field in STEP_FIELDS:
        np.testing.assert_array_equal(host(getattr(rg, field)), getattr(rc, field),
                                      err_msg=f"step {t}: {field}")
    assert rg.counts == rc.counts, f"step {t}"


def assert_same_state(g, c, when: str) -> None:
    st = g.host_state()
    for name in STATE:
        np.testing.assert_array_equal(st[name], getattr(c, name), err_msg=f"{when}: {name}")
    np.testing.assert_array_equal(st["row_slot"], c.rows[:, ROW_SLOT], err_msg=f"{when}: row_slot")
    np.testing.assert_array_equal(st["q_count"], c.victims.count, err_msg=f"{when}: queue counts")
    for q in range(len(c.victims.count)):
        np.testing.assert_array_equal(host(g.victims.queue(q)), c.victims.queue(q), err_msg=f"{when}: queue {q}")
    n = int(c.landing.n[0])
    assert int(st["land_n"][0]) == n, when
    np.testing.assert_array_equal(st["land_ids"][:n], c.landing.ids[:n], err_msg=f"{when}: landing")


def run_steps(g, c, batches, w: int) -> dict:
    totals = dict.fromkeys(cpu_engine.COUNT_NAMES, 0)
    for t, batch in enumerate(batches):
        ids, offsets = window_of(batches, t, w)
        rg, rc = g.step(batch, ids, offsets), c.step(batch, ids, offsets)
        assert_same_step(rg, rc, t)
        for k, v in rc.counts.items():
            totals[k] += v
        assert g.end_iteration() == c.end_iteration()
        assert_same_state(g, c, f"after step {t}")
    return totals


# ---- the GPU engine against the CPU engine ----------------------------------------------------
@pytest.mark.parametrize("pvp", [False, True], ids=["plain", "pvp"])
@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_steps_match_cpu_engine(backend, policy, pvp):
    size = SIZES[backend]
    rng = np.random.default_rng(2 * POLICIES.index(policy) + pvp)
    static = rng.integers(0, 256, size["num_rows"]).astype(np.uint8)
    static[::7] = 17  # many PageRank ties: the tie-breaks decide
    g, c = engines(size, static=static, policy=policy, pvp=pvp, lookahead=3)  # K: horizon only
    assert g.policy_name == c.policy_name and g.lookahead == c.lookahead
    totals = run_steps(g, c, mixed_trace(rng, size), max(size["window"], c.lookahead))
    assert totals["hits"] > 0 and totals["evictions"] > 0  # the trace exercises hits and victims
    if pvp:
        assert totals["spills"] > 0
    if policy == "horizon":
        assert totals["bypassed"] > 0


REPLAY_CASES = {
    "hybrid-refresh3": dict(policy="hybrid", pvp=True, refresh_every=3),
    "hybrid-long-window": dict(policy="hybrid", pvp=True, window=40),  # CPU rescans (> 31)
    "dynamic-40-ways": dict(policy="dynamic", pvp=True, ways=40),        # more ways than lanes
    "lru-one-small-set": dict(policy="lru", pvp=False, capacity=5),      # capacity < ways
    "sieve-owner-1-of-2": dict(policy="sieve", pvp=True, num_owners=2, owner=1),
    "hybrid-pvp-drops": dict(policy="hybrid", pvp=True, victim_depth=2),
    "static-no-window": dict(policy="static", pvp=True, window=0),
    "round-robin-pvp": dict(policy="round_robin", pvp=True),
    "horizon-k2": dict(policy="horizon", pvp=False, lookahead=2),
    "horizon-pvp-k6": dict(policy="horizon", pvp=True, lookahead=6),    # K > W: spills within W only
    "horizon-whole-trace": dict(policy="horizon", pvp=False, lookahead=40, ways=40),
}


@pytest.mark.parametrize("case", list(REPLAY_CASES))
@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_replay_matches_cpu_engine(backend, case):
    size = SIZES[backend]
    kw = dict(REPLAY_CASES[case])
    if "ways" in kw:
        kw["capacity"] = kw["ways"] * 4
    rng = np.random.default_rng(sum(map(ord, case)))
    static = rng.integers(0, 256, size["num_rows"]).astype(np.uint8)
    g, c = engines(size, static=static, **kw)
    batches = mixed_trace(rng, size, kw.get("num_owners", 1), kw.get("owner", 0))
    flat = np.concatenate(batches)
    offsets = np.zeros(len(batches) + 1, np.int64)
    np.cumsum([len(b) for b in batches], out=offsets[1:])
    out_g, out_c = g.replay(flat, offsets), c.replay(flat, offsets)
    np.testing.assert_array_equal(out_g, out_c)
    assert g.t == c.t == len(batches)
    assert_same_state(g, c, "after replay")
    assert out_c[:, cpu_engine.COUNT_NAMES.index("evictions")].sum() > 0


def cache_cfg(**kw):
    """A duck-typed CacheConfig (lsm_gnn.config needs pydantic, which GPU images may lack)."""
    from types import SimpleNamespace

    vb = SimpleNamespace(enabled=kw.pop("pvp", True), depth=kw.pop("depth", 8), host_fraction=0.1, force=False)
    base = dict(enabled=True, ways=8, policy="hybrid", window=4, refresh_every=1, lookahead=16,  # K: horizon only
                engine="cpu", victim_buffer=vb)
    return SimpleNamespace(**{**base, **kw})


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_cache_replay_on_the_gpu_engine(backend):
    """lsm_gnn.cache.replay.replay(engine="gpu") gives the CPU engine's per-batch counts."""
    from lsm_gnn.cache.replay import replay

    size = SIZES[backend]
    rng = np.random.default_rng(11)
    static = rng.integers(0, 256, size["num_rows"]).astype(np.uint8)
    cfg = cache_cfg(ways=size["ways"], window=size["window"], depth=size["depth"])
    batches = mixed_trace(rng, size)
    budget = budget_for_cache_rows(cfg, size["capacity"], size["num_rows"])
    res = {e: replay(batches, cfg, size["num_rows"], static, budget=budget, engine=e)
           for e in ("cpu", "gpu")}
    for name, per_batch in res["cpu"].per_batch.items():
        np.testing.assert_array_equal(res["gpu"].per_batch[name], per_batch, err_msg=name)
    assert res["cpu"].per_batch["spills"].sum() > 0


@pytest.mark.parametrize("policy", POLICIES + ("hybrid_pvp",))
@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_one_overloaded_set_matches_cpu_engine(backend, policy):
    """Adversarial: every miss lands in one set, so one warp serves them all in order."""
    size = SIZES[backend]
    rng = np.random.default_rng(7)
    static = (np.arange(size["num_rows"]) % 5).astype(np.uint8)  # heavy ties
    pvp = policy == "hybrid_pvp"
    g, c = engines(size, static=static, policy="hybrid" if pvp else policy, pvp=pvp, lookahead=5)
    sets = cache_geometry(size["capacity"], size["ways"]).sets
    totals = run_steps(g, c, one_set_trace(rng, size, sets), max(size["window"], c.lookahead))
    assert totals["evictions"] > size["ways"]


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_empty_and_all_duplicate_batches(backend):
    size = SIZES[backend]
    static = np.full(size["num_rows"], 3, np.uint8)
    g, c = engines(size, static=static, policy="hybrid", pvp=True)
    batches = [np.zeros(0, np.int64), np.full(50, 11, np.int64), np.full(30, 11, np.int64),
               np.zeros(0, np.int64), np.arange(0, 40, dtype=np.int64)]
    totals = run_steps(g, c, batches, size["window"])
    assert totals["requests"] == 120 and totals["distinct"] == 42 and totals["hits"] == 2


# row sizes of every unit (16, 8, 4, 1 bytes) and row counts around the rows per block
COPY_CASES = [(np.float32, 1024, 37), (np.float32, 24, 12), (np.float32, 6, 70), (np.uint8, 7, 12),
              (np.float16, 3, 33), (np.uint8, 64, 65), (np.float32, 40, 1)]


@pytest.mark.parametrize("dtype,dim,n", COPY_CASES, ids=lambda x: getattr(x, "__name__", str(x)))
@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_copy_rows_moves_rows(backend, dtype, dim, n):
    cp = gpu_engine._cupy()
    rng = np.random.default_rng(dim * 1000 + n)
    src = rng.integers(0, 100, (n + 20, dim)).astype(dtype)
    dst = np.zeros((n + 9, dim), dtype)
    s_idx, d_idx = rng.choice(n + 20, n, replace=False), rng.choice(n + 9, n, replace=False)
    dst_dev = cp.asarray(dst)
    gpu_engine.copy_rows(cp.asarray(src), s_idx, dst_dev, d_idx)
    dst[d_idx] = src[s_idx]
    np.testing.assert_array_equal(host(dst_dev), dst)
    with pytest.raises(InputError, match="row shape"):
        gpu_engine.copy_rows(cp.asarray(src), s_idx, cp.asarray(np.zeros((20, dim + 1), dtype)), d_idx)


@pytest.mark.parametrize("offset", [4, 8, 1])
@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_copy_rows_between_arrays_not_aligned_to_16_bytes(backend, offset):
    """Views that start `offset` bytes into a buffer: the copy narrows its unit (16-byte rows moved
    as 8-, 4- or 1-byte units) and moves exactly the rows asked, nothing around them."""
    cp = gpu_engine._cupy()
    rng = np.random.default_rng(offset)
    rb, n = 48, 21
    buf_src = cp.asarray(rng.integers(0, 255, 64 + 40 * rb).astype(np.uint8))
    buf_dst = cp.asarray(np.zeros(64 + 30 * rb, np.uint8))
    src = buf_src[offset: offset + 40 * rb].reshape(40, rb)
    dst = buf_dst[offset: offset + 30 * rb].reshape(30, rb)
    if backend == "emulated":
        assert rowcopy.address(src) % 16 == rowcopy.address(dst) % 16 == offset % 16
    plan = rowcopy.plan(n, rb, rowcopy.address(src), rowcopy.address(dst))
    assert plan.unit == {4: 4, 8: 8, 1: 1}[offset]
    s_idx, d_idx = rng.choice(40, n, replace=False), rng.choice(30, n, replace=False)
    gpu_engine.copy_rows(src, s_idx, dst, d_idx)
    expect = np.zeros((30, rb), np.uint8)
    expect[d_idx] = host(src)[s_idx]
    np.testing.assert_array_equal(host(dst), expect)
    outside = np.concatenate([host(buf_dst)[:offset], host(buf_dst)[offset + 30 * rb:]])
    assert not outside.any()


def test_row_copy_plan_takes_the_widest_aligned_unit_and_fills_blocks():
    assert rowcopy.plan(100, 4096, 0, 256) == rowcopy.CopyPlan(16, 256, 5, 13)    # a warp per row, 8 per block
    assert rowcopy.plan(100, 64, 0, 0) == rowcopy.CopyPlan(16, 4, 2, 2)          # 4 threads per row, 64 per block
    assert rowcopy.plan(100, 4096, 0, 4).unit == 4                                # a 4-byte aligned side
    assert rowcopy.plan(5, 24, 0, 0) == rowcopy.CopyPlan(8, 3, 2, 1)
    assert rowcopy.plan(5, 7, 0, 0) == rowcopy.CopyPlan(1, 7, 3, 1)
    assert rowcopy.plan(257, 1, 0, 0).blocks == 2                                 # 256 one-byte rows per block
    assert rowcopy.plan(0, 16, 0, 0).blocks == 0


# ---- a corrupt policy state ends the step, in both engines alike -------------------------------
def _corrupt_sieve(eng, si: int, how: str) -> None:
    """Damage set si's SIEVE list the same way in either engine (host arrays or device arrays)."""
    ways = eng.geometry.ways
    arrays = {name: getattr(eng, name) for name in ("visited", "newer", "older", "head", "tail", "hand")}
    host_copy = {k: host(v).copy() for k, v in arrays.items()}
    base = si * ways
    host_copy["visited"][base: base + 2 * ways] = 1   # every line of this set and the next visited: the
    # hand walks the whole list, and a walk that strays into the next set clears bits there
    if how == "link-out-of-set":
        host_copy["newer"][base + host_copy["tail"][si]] = ways + 3   # points into the next set
    elif how == "hand-out-of-set":
        host_copy["hand"][si] = ways
    elif how == "tail-out-of-set":
        host_copy["hand"][si] = -1
        host_copy["tail"][si] = 2 * ways
    elif how == "cycle":  # newer links form a cycle that never reaches the head: still ends, valid
        for w in range(ways):
            host_copy["newer"][base + w] = (w + 1) % ways
    for name, arr in arrays.items():   # a device array (it has .get) takes a device copy
        arr[...] = gpu_engine._cupy().asarray(host_copy[name]) if hasattr(arr, "get") else host_copy[name]


@pytest.mark.parametrize("how", ["link-out-of-set", "hand-out-of-set", "tail-out-of-set"])
@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_a_corrupt_sieve_list_ends_the_step_with_state_error_in_both_engines(backend, how):
    """The hand's walk is bounded by the associativity and checks every position and link it
    follows: a list that leaves its set stops the step (StateError, both engines), and nothing of
    the next set is touched."""
    from lsm_gnn.utils.errors import StateError

    size = SIZES[backend]
    rng = np.random.default_rng(5)
    static = rng.integers(0, 256, size["num_rows"]).astype(np.uint8)
    g, c = engines(size, static=static, policy="sieve", pvp=False)
    sets = cache_geometry(size["capacity"], size["ways"]).sets
    batches = one_set_trace(rng, size, sets)   # set 0 fills and keeps evicting
    run_steps(g, c, batches[:3], size["window"])
    for eng in (g, c):
        _corrupt_sieve(eng, 0, how)
    before = {name: host(getattr(c, name))[size["ways"]: 2 * size["ways"]].copy() for name in ("visited", "newer")}
    for eng in (g, c):
        with pytest.raises(StateError, match="corrupt"):
            step_until_raised(eng, batches, 3, size["window"])
        for name, was in before.items():   # set 1's lines are untouched
            np.testing.assert_array_equal(host(getattr(eng, name))[size["ways"]: 2 * size["ways"]], was)


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_a_sieve_list_cycling_inside_its_set_still_ends_with_the_same_victims(backend):
    """Links that cycle inside the set (every line visited): the walk ends within ways + 1 looks
    and both engines pick the same victims and keep the same state."""
    size = SIZES[backend]
    rng = np.random.default_rng(6)
    static = rng.integers(0, 256, size["num_rows"]).astype(np.uint8)
    g, c = engines(size, static=static, policy="sieve", pvp=False)
    sets = cache_geometry(size["capacity"], size["ways"]).sets
    batches = one_set_trace(rng, size, sets)
    run_steps(g, c, batches[:3], size["window"])
    for eng in (g, c):
        _corrupt_sieve(eng, 0, "cycle")
    totals = run_steps(g, c, batches[3:5], size["window"])
    assert totals["evictions"] > 0


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_a_negative_round_robin_counter_is_corrupt_state_in_both_engines(backend):
    """C's % of a negative counter is a negative way, Python's a valid one: both engines call a
    negative counter corrupt instead of choosing different ways."""
    from lsm_gnn.utils.errors import StateError

    size = SIZES[backend]
    rng = np.random.default_rng(2)
    static = np.zeros(size["num_rows"], np.uint8)
    g, c = engines(size, static=static, policy="round_robin", pvp=False)
    sets = cache_geometry(size["capacity"], size["ways"]).sets
    batches = one_set_trace(rng, size, sets)
    run_steps(g, c, batches[:2], size["window"])
    c.rr[0] = -3
    g.rr[...] = gpu_engine._cupy().asarray(c.rr)
    for eng in (g, c):
        with pytest.raises(StateError, match="iteration 2: .*corrupt"):
            step_until_raised(eng, batches, 2, size["window"])


def step_until_raised(eng, batches, t: int, w: int) -> None:
    """Step t, which finds a corrupt state: the CPU engine raises in the step, the GPU engine (its
    counts read one step late) at the latest in the next step, before that step launches anything."""
    eng.step(batches[t], *window_of(batches, t, w))
    if isinstance(eng, gpu_engine.GpuCacheEngine):
        eng.step(batches[t + 1], *window_of(batches, t + 1, w))


# ---- a step with no host sync ------------------------------------------------------------------
def gpu_only(size: dict, **kw):
    """A GpuCacheEngine with `engines`' settings and GPU-only keywords (graph)."""
    graph = kw.pop("graph", False)
    g, c = engines(size, **kw)
    g.graph = graph
    return g, c


@pytest.mark.parametrize("pvp", [False, True], ids=["plain", "pvp"])
@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_graph_replayed_steps_match_cpu_engine(backend, policy, pvp):
    """With graph=True every step is one replay of a graph captured once per kind of step (refresh
    or not, per scratch size): t, n and the window reach its kernels through device memory, so the
    replays make the CPU engine's decisions step after step."""
    size = SIZES[backend]
    rng = np.random.default_rng(100 + 2 * POLICIES.index(policy) + pvp)
    static = rng.integers(0, 256, size["num_rows"]).astype(np.uint8)
    g, c = gpu_only(size, static=static, policy=policy, pvp=pvp, lookahead=3, graph=True, refresh_every=2)
    totals = run_steps(g, c, mixed_trace(rng, size), max(size["window"], c.lookahead))
    assert totals["evictions"] > 0
    assert g.graph_error is None and g.graph_steps == g.steps == size["batches"]
    assert 1 <= len(g._graphs) <= 4   # captured once per kind of step, then replayed


@pytest.mark.parametrize("graph", [False, True], ids=["launches", "graph"])
@pytest.mark.parametrize("policy", ["hybrid_pvp", "horizon"])
@pytest.mark.parametrize("backend", ["emulated"], indirect=True)
def test_a_step_reads_no_device_memory_on_the_host(backend, policy, graph):
    """Inside step() and end_iteration() (after the previous step's counts are collected) the
    stand-in raises on any host read of device memory (.get, int, bool, asnumpy, an event or
    stream wait): none happens, and the decisions still equal the CPU engine's."""
    from cuda_emu import no_host_sync

    size = SIZES[backend]
    rng = np.random.default_rng(21)
    static = rng.integers(0, 256, size["num_rows"]).astype(np.uint8)
    pvp = policy == "hybrid_pvp"
    g, c = gpu_only(size, static=static, policy="hybrid" if pvp else policy, pvp=pvp, lookahead=4, graph=graph)
    batches = mixed_trace(rng, size)
    w = max(size["window"], c.lookahead)
    for t, batch in enumerate(batches):
        ids, offsets = window_of(batches, t, w)
        g.collect()
        with no_host_sync():
            rg = g.step(batch, ids, offsets)
            g.end_iteration()
        rc = c.step(batch, ids, offsets)
        c.end_iteration()
        assert_same_step(rg, rc, t)
    assert g.host_syncs_in_steps == 0 and g.sync_stats()["host_syncs_per_step"] == 0
    assert g.host_waits <= g.steps == len(batches)   # at most one wait for counts a step, outside it
    assert g.graph_steps == (len(batches) if graph else 0)


@pytest.mark.parametrize("backend", ["emulated"], indirect=True)
def test_the_stand_in_catches_a_host_read_inside_a_step(backend, monkeypatch):
    """The no-sync check can fail: a step that reads a count back (as the engine once did with
    int(scan[n - 1])) raises HostSyncError on the stand-in."""
    from cuda_emu import HostSyncError, no_host_sync

    size = SIZES[backend]
    g, _ = engines(size, static=np.zeros(size["num_rows"], np.uint8), policy="lru", pvp=False)
    serve = g._serve
    monkeypatch.setattr(g, "_serve", lambda batch, n: (serve(batch, n), int(g._P[gpu_engine.P_ND]))[0])
    with no_host_sync(), pytest.raises(HostSyncError, match="int"):
        g.step(np.arange(10, dtype=np.int64))


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_a_corrupt_state_is_raised_at_most_one_batch_late(backend):
    """The corrupt-state flag of step t stays on the device: step t returns, and reading its result
    or starting step t + 1 raises StateError naming iteration t, before step t + 1 launches anything."""
    from lsm_gnn.utils.errors import StateError

    size = SIZES[backend]
    rng = np.random.default_rng(2)
    for read_result in (True, False):
        g, c = engines(size, static=np.zeros(size["num_rows"], np.uint8), policy="round_robin", pvp=False)
        sets = cache_geometry(size["capacity"], size["ways"]).sets
        batches = one_set_trace(rng, size, sets)
        run_steps(g, c, batches[:2], size["window"])
        g.rr[...] = gpu_engine._cupy().asarray(np.full(sets, -3, np.int64))
        res = g.step(batches[2], *window_of(batches, 2, size["window"]))   # no raise: nothing read back yet
        keys_after = host(g.keys).copy()
        with pytest.raises(StateError, match="iteration 2: .*corrupt"):
            if read_result:
                res.counts
            else:
                g.step(batches[3], *window_of(batches, 3, size["window"]))
        np.testing.assert_array_equal(host(g.keys), keys_after)   # step 3 changed nothing
        assert g.steps == 3


@pytest.mark.parametrize("backend", ["emulated"], indirect=True)
def test_the_counting_sort_by_set_is_stable_over_several_passes_and_tiles(backend):
    """cache_digit_* sort (bucket, d) pairs by bucket, stably (d ascending inside a bucket, as the
    CPU engine serves a set's misses), 8 bits a pass: 600 sets (two passes), 700 pairs (3 tiles)."""
    cp = gpu_engine._cupy()
    rng = np.random.default_rng(3)
    g = gpu_engine.GpuCacheEngine(600 * 2, 5000, np.zeros(5000, np.uint8), **engine_kwargs(ways=2, window=4))
    assert g.geometry.sets == 600 and g._sort_bits == 10
    for nd, bound in ((700, 900), (1, 1), (256, 256), (0, 40)):
        g._ensure_scratch(bound)
        buckets = rng.integers(0, 601, nd)
        buckets[: nd // 3] = 7   # a crowded bucket across tiles
        g._sort[0][0][:nd] = cp.asarray(buckets)
        g._sort[0][1][:nd] = cp.asarray(np.arange(nd))
        g._P[gpu_engine.P_ND] = nd
        key, val = g._sort_by_bucket(bound)
        order = np.argsort(buckets, kind="stable")
        np.testing.assert_array_equal(host(val)[:nd], order, err_msg=str(nd))
        np.testing.assert_array_equal(host(key)[:nd], buckets[order], err_msg=str(nd))


@pytest.mark.parametrize("backend", ["emulated"], indirect=True)
def test_the_device_sized_scan_equals_cumsum_around_tile_boundaries(backend):
    """cache_scan_* read the length from the parameter block and leave the total there."""
    cp = gpu_engine._cupy()
    rng = np.random.default_rng(4)
    g = gpu_engine.GpuCacheEngine(64, 1000, np.zeros(1000, np.uint8), **engine_kwargs())
    g._ensure_scratch(20000)
    for length, bound in ((0, 10), (1, 1), (255, 300), (256, 256), (257, 9000), (8193, 8193), (19999, 20000)):
        x = rng.integers(0, 3, 20000)
        g._flag[...] = cp.asarray(x)
        g._scanbuf[...] = -7
        g._P[gpu_engine.P_N] = length
        g._scan(g._flag, g._scanbuf, bound, len_at=gpu_engine.P_N, total_at=gpu_engine.P_ND)
        np.testing.assert_array_equal(host(g._scanbuf)[:length], np.cumsum(x[:length]), err_msg=str(length))
        assert (host(g._scanbuf)[length:] == -7).all()   # nothing past the device length is written
        assert int(host(g._P)[gpu_engine.P_ND]) == int(x[:length].sum())


@pytest.mark.parametrize("backend", ["emulated"], indirect=True)
def test_steps_allocate_no_device_memory_once_the_scratch_fits(backend, monkeypatch):
    """Scratch is allocated for the largest batch so far: steps of no larger batches allocate
    nothing (scans and the sort included); a larger batch grows it once."""
    cp = gpu_engine._cupy()
    size = SIZES[backend]
    rng = np.random.default_rng(8)
    static = rng.integers(0, 256, size["num_rows"]).astype(np.uint8)
    g, _ = engines(size, static=static, policy="hybrid", pvp=True)
    batches = mixed_trace(rng, size)
    g.step(batches[0], *window_of(batches, 0, 4))
    g.end_iteration()
    allocs = []
    for name in ("empty", "zeros", "full", "cumsum", "sort", "concatenate"):
        real = getattr(cp, name)
        monkeypatch.setattr(cp, name, lambda *a, _real=real, _name=name, **k: (allocs.append(_name), _real(*a, **k))[1])
    for t in range(1, 4):
        g.step(batches[t][: len(batches[t]) - t], *window_of(batches, t, 4))
        g.end_iteration()
    assert allocs == []
    size_before = g._scratch_size
    g.step(np.concatenate([batches[4]] * (size_before // len(batches[4]) + 1)), *window_of(batches, 4, 4))
    assert g._scratch_size > size_before and allocs.count("empty") >= 1


# ---- no GPU needed ----------------------------------------------------------------------------
def test_sources_define_every_kernel_the_engine_launches():
    files = gpu_codegen.module_files()
    for name in ("cache_common.cuh", "cache_lookup.cu", "cache_fill.cu", "cache_tags.cu",
                 "cache_spill.cu", "cache_pvp.cu", "cache_horizon.cu", "cache_scan.cu"):
        assert name in files, name
    # one header of device hooks per module of the built-in policies (hybrid_pvp lives in hybrid's)
    for cls in policies.BUILTIN:
        assert gpu_codegen.cuda_header(cls) in files, cls.name
    assert [c.name for c in gpu_codegen.gpu_policies()] == [c.name for c in policies.BUILTIN]
    defined = gpu_codegen.defined_kernels()
    assert set(gpu_engine.KERNELS) <= defined, set(gpu_engine.KERNELS) - defined
    # every kernel name the engine's code passes to a launch is in KERNELS
    code = open(gpu_engine.__file__).read()
    launched = set(re.findall(r'(?:_launch|get_function)\(\s*"(\w+)"', code))
    assert launched and launched <= set(gpu_engine.KERNELS), launched - set(gpu_engine.KERNELS)


def _device_functions(text: str) -> dict[str, str]:
    """name -> parameter list of every __device__ function defined in `text`."""
    text = re.sub(r"//[^\n]*", "", text)
    return {m.group(1): " ".join(m.group(2).split())
            for m in re.finditer(r"__device__[^;{()]*?\b(\w+)\s*\(([^)]*)\)\s*\{", text)}


def test_each_policy_header_defines_the_hooks_its_traits_call_for():
    """Read from the headers (no compiler): cuda/policies/<module>.cuh defines `<name>_<hook>` for
    exactly the numba hooks the policy declares (the victim as a key or as a lane-0 walk, as its
    victim_choice says; admit as its admission says), with the dispatch's parameters, and the
    generated dispatch calls each of them under the policy's code."""
    dispatch = gpu_codegen.policy_dispatch()
    hooks = {name: " ".join(params.split()) for name, (_, params, _, _, _) in gpu_codegen.CUDA_HOOKS.items()}
    suffixes = {suffix for (_, _, _, suffix, _) in gpu_codegen.CUDA_HOOKS.values()}
    for cls in policies.BUILTIN:
        defined = _device_functions(cuda_sources.read(gpu_codegen.cuda_header(cls)))
        want = gpu_codegen.cuda_functions(cls)
        assert ("victim_key" in want) == (cls.victim_choice == "key"), cls.name
        assert ("admit" in want) == cls.admission, cls.name
        for hook, fn in want.items():
            assert defined.get(fn) == hooks[hook], (cls.name, fn, defined.get(fn))
            assert re.search(rf"case {gpu_codegen.code_macro(cls)}: (return )?{fn}\(", dispatch), fn
        # no hook of this policy's name that its traits do not call for
        own = {f for f in defined if f.startswith(cls.name + "_") and f[len(cls.name) + 1:] in suffixes}
        assert own == set(want.values()), (cls.name, own - set(want.values()))
    # the traits as predicates on the code, from the registry
    for trait, members in (("long_lookahead", [c for c in policies.BUILTIN if c.long_lookahead]),
                           ("admission", [c for c in policies.BUILTIN if c.admission]),
                           ("lane0_victim", [c for c in policies.BUILTIN if c.victim_choice == "scan"])):
        line = next(x for x in dispatch.splitlines() if f"policy_{trait}(int code)" in x)
        assert set(re.findall(r"code == (\w+)", line)) == {gpu_codegen.code_macro(c) for c in members}, trait


def test_kernels_take_the_policy_state_in_the_registry_order():
    """cache_lookup and cache_fill declare the state arrays as policies.STATE_SPECS does (names,
    types, STATE_ORDER; the built-in policies keep no slots of their own), which is how the engine
    passes them and how PolicyState is built."""
    params = gpu_codegen.state_params()
    assert params == [f"{gpu_codegen.C_TYPES[np.dtype(policies.STATE_SPECS[n][0])]}* {n}" for n in policies.STATE_ORDER]
    source = re.sub(r"//[^\n]*", "", gpu_codegen.module_source())
    for kernel in ("cache_lookup", "cache_fill"):
        decl = re.search(rf'void {kernel}\(([^)]*)\)', source).group(1)
        decl = [" ".join(p.split()) for p in decl.split(",")]
        start = decl.index(params[0])
        assert decl[start: start + len(params)] == params, kernel
    assert f"#define POLICY_STATE_OF_PARAMS {{{', '.join(policies.STATE_ORDER)}}}" in gpu_codegen.policy_state_source()


def test_kernels_are_compiled_with_the_python_constants():
    defines = dict(re.findall(r"#define (\w+) (\S+)", gpu_codegen.constant_defines()))
    assert int(defines["NO_REUSE"].rstrip("L")) == int(window.NO_REUSE)
    assert int(defines["FRESH"].rstrip("L")) == int(window.FRESH)
    tag_t = re.search(r"#define TAG_T (.+)", gpu_codegen.constant_defines()).group(1).strip()
    assert tag_t == {4: "int", 8: "long long"}[np.dtype(window.TAG_DTYPE).itemsize]
    # the policy codes are the registry's, and only the registry's
    for cls in policies.BUILTIN:
        assert int(defines[f"POLICY_{cls.name.upper()}"]) == cls.code == policies.REGISTRY[cls.name].code
    assert len({cls.code for cls in policies.BUILTIN}) == len(policies.BUILTIN)
    assert int(defines["STATUS_HIT"]) == cpu_engine.HIT
    assert int(defines["STATUS_VICTIM_HIT"]) == cpu_engine.VICTIM_HIT
    assert int(defines["SPILL_DROPPED"]) == cpu_engine.SPILL_DROPPED
    assert gpu_codegen.module_source().startswith(gpu_codegen.constant_defines())
    # the header's standalone defaults (for a compile of the header alone) are the same values;
    # no CUDA file numbers a policy (the codes come from the registry only)
    header = cuda_sources.read(gpu_codegen.COMMON_HEADER)
    defaults = dict(re.findall(r"#define (\w+) (\S+)", header))
    for key in ("NO_REUSE", "FRESH", "NOT_SPILLED"):
        assert defaults[key] == defines[key], key
    for name in cuda_sources.names():
        assert not re.search(r"#define POLICY_\w+ \d", cuda_sources.read(name)), name
        assert "POLICY_" not in re.sub(r"//[^\n]*", "", cuda_sources.read(name)).replace("POLICY_STATE_OF_PARAMS", ""), name


@pytest.mark.skipif(gpu_engine.available(), reason="checks the no-GPU behaviour")
def test_without_a_gpu_the_engine_is_a_clear_error():
    from lsm_gnn.cache.engines import make_engine

    with pytest.raises(InputError, match="CuPy with a usable GPU"):
        gpu_engine.GpuCacheEngine(64, 1000, np.zeros(1000, np.uint8), **engine_kwargs())
    with pytest.raises(InputError, match="CuPy with a usable GPU"):
        make_engine(cache_cfg(), budget_for_cache_rows(cache_cfg(), 64, 1000), 1000, np.zeros(1000, np.uint8),
                    kind="gpu")
    from lsm_gnn.cache.replay import replay

    with pytest.raises(InputError, match="CuPy with a usable GPU"):
        replay([np.arange(10)], cache_cfg(), 1000, np.zeros(1000, np.uint8),
               budget=budget_for_cache_rows(cache_cfg(), 64, 1000), engine="gpu")


def test_make_engine_builds_the_engine_the_config_names_with_its_settings():
    from lsm_gnn.cache.engines import make_engine
    from lsm_gnn.cache.reference import ReferenceCache

    static = np.zeros(100, np.uint8)
    cfg = cache_cfg(ways=4, window=3, depth=5, policy="lru")
    budget = budget_for_cache_rows(cfg, 16, 100)
    eng = make_engine(cfg, budget, 100, static)
    assert isinstance(eng, CpuCacheEngine)
    assert (eng.geometry.ways, eng.window, eng.depth, eng.pvp, eng.policy_name) == (4, 3, 5, True, "lru")
    assert isinstance(make_engine(cfg, budget, 100, static, kind="reference"), ReferenceCache)
    with pytest.raises(InputError, match="unknown cache engine"):
        make_engine(cfg, budget, 100, static, kind="tpu")


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_the_gpu_checks_engine_steps_report_equal_counts_and_every_batch_size(backend, monkeypatch):
    """`check gpu`'s engine and engine_sweep steps (lsm_gnn.bench.cache), on a small trace: every
    case's counts equal the CPU engine's, every step was a graph replay with no host sync in it,
    and the sweep has one point per batch size."""
    import sys
    from types import SimpleNamespace

    from lsm_gnn.bench import cache as bench_cache

    if backend == "emulated":  # the steps import cupy themselves: the stand-in, with a no-op sync
        fake = SimpleNamespace(asarray=np.asarray,
                               cuda=SimpleNamespace(Device=lambda: SimpleNamespace(synchronize=lambda: None)))
        monkeypatch.setitem(sys.modules, "cupy", fake)
    size = SIZES[backend]
    one = bench_cache.gpu_engine_vs_cpu(num_rows=size["num_rows"], batches=3, batch=size["batch"],
                                        cases=(("hybrid", True), ("lru", False)))
    assert "error" not in one and one["counts_equal"]
    # the engine ran every step as a graph replay, with no host read inside a step (its own counts)
    assert one["engine_host_syncs_per_step"] == 0 and one["engine_graph_step_fraction"] == 1.0
    assert all(c["engine_graph_error"] is None and c["engine_host_waits_per_step"] <= 1 for c in one["cases"])
    assert [c["policy"] for c in one["cases"]] == ["hybrid_pvp", "lru"] and one["headline_case"] == "hybrid_pvp"
    assert all(c["requests_per_batch"] * 3 == one["trace"]["requests"] for c in one["cases"])
    sweep = bench_cache.gpu_engine_sweep(batch_sizes=(size["batch"] // 4, size["batch"]), rows_per_request=6,
                                         batches=2)
    assert "error" not in sweep and sweep["counts_equal"]
    assert [p["batch"] for p in sweep["points"]] == [size["batch"] // 4, size["batch"]]
    assert all(p["rows"] == 6 * p["batch"] and p["gpu_ms_per_batch"] > 0 for p in sweep["points"])
    # what `check gpu`'s engine targets read is in the sweep's output (the ratio at ~81k requests a
    # batch needs a point of that size, which this small trace has not: null, with why)
    from lsm_gnn.check import gpu as gc

    targets = {f: gc.compute_target(f, {"engine_sweep": sweep}) for f in gc.TARGETS if gc.target_steps(f) == ("engine_sweep",)}
    assert targets["engine_fixed_ms"]["value"] is not None and targets["engine_host_syncs_per_step"]["value"] == 0
    assert targets["gpu_vs_cpu_requests_ratio"]["value"] is None and "81,000" in targets["gpu_vs_cpu_requests_ratio"]["why"]
