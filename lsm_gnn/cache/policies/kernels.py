"""The policy hooks the CPU engine's kernels call, dispatched by the policy's code over the registry.

Numba cannot call a function picked at run time from a table, so each hook is a chain of branches
on `code` that calls the policies' own numba functions. The chain is not written here: the
kernels receive a `PolicyTable` token (`table()`) whose numba type names the registered policies
(their `kernel_key`s, in code order), and each hook below is a numba `overload` that, when a
kernel is compiled for that type, generates the chain from the policies' `kernels` tables (a
policy without a hook: a no-op, or True for admit). The traits the kernels ask
(`long_lookahead`, `admission`) are chains of constants the same way. So nothing in this file or
in the engine names a policy, and a policy registered later (a plug-in, a test's) runs without a
line here: a new registry is a new type, compiled (and cached on disk by numba) once. The key of
a policy holds a digest of its module, and the type a digest of this file and base.py, so an
edited policy module or dispatch is compiled afresh too (numba's cache alone follows only the
engine's own file). Keep the class names PolicyTable / PolicyTableType: numba's cache index
pickles the type, and an index naming a class that no longer exists fails to load.

Every hook is `@njit(forceinline=True, _nrt=False)` (the policies' `kernel_*` and the chains
alike): LLVM inlines it and, without NRT, no reference count moves when an array crosses the
call. Numba's IR-level `inline="always"` (or a plain call) kept an NRT incref/decref pair per
array per call in the per-id loops, which made replay 25-35 % slower than the engine with the
policies written inline; with these flags it is as fast or faster (docs/cache.md, "Policies as
plug-ins"). The hooks allocate nothing, which is what `_nrt=False` requires.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from numba import types
from numba.extending import NativeValue, models, overload, register_model, typeof_impl, unbox

from lsm_gnn.cache.policies import by_kernel_key, kernel_classes, policy_class, slot_offsets
from lsm_gnn.utils.errors import InputError

_HOOK_JIT = {"forceinline": True, "_nrt": False}
# this file and base.py (the state indices) shape the generated chains: part of the cache key too
_DISPATCH_DIGEST = hashlib.sha1(b"".join(
    Path(f).read_bytes() for f in (__file__, Path(__file__).with_name("base.py")))).hexdigest()


class PolicyTable:
    """What the CPU kernels receive for "which policies exist": only its numba type matters.

    The type is built once, with the token, and held as `_numba_type_`: numba's dispatcher reads
    that attribute in C (_typeof.cpp, `_typecode_fallback`) when it types an argument it has no
    fingerprint for, so a kernel call types the token without a Python call (a `typeof_impl`
    alone is a call into Python, and a new PolicyTableType with its digest, on every dispatch)."""

    __slots__ = ("keys", "_numba_type_")

    def __init__(self, keys: tuple[tuple[int, str], ...]):
        self.keys = keys
        self._numba_type_ = PolicyTableType(keys)

    def __repr__(self) -> str:
        return f"PolicyTable({[k for _, k in self.keys]})"


class PolicyTableType(types.Opaque):
    """One type per registry: (code, kernel_key) of every policy with numba hooks."""

    def __init__(self, keys: tuple[tuple[int, str], ...]):
        self.policy_keys = tuple(keys)
        digest = hashlib.sha1((repr(self.policy_keys) + _DISPATCH_DIGEST).encode()).hexdigest()[:16]
        super().__init__(name=f"PolicyTable({len(self.policy_keys)} policies, {digest})")


@typeof_impl.register(PolicyTable)
def _typeof_table(val, c):  # numba.typeof() from Python; the dispatcher reads _numba_type_ itself
    return val._numba_type_


register_model(PolicyTableType)(models.OpaqueModel)


@unbox(PolicyTableType)
def _unbox_table(typ, obj, c):
    return NativeValue(c.context.get_dummy_value())


_TABLES: dict[tuple[tuple[int, str], ...], PolicyTable] = {}


def table() -> PolicyTable:
    """The token of the registry as it is now (every policy with numba hooks): one per registry
    state, built once; a policy registered since is a new state, so a new token and type."""
    keys = tuple((cls.code, cls.kernel_key) for cls in kernel_classes())
    tab = _TABLES.get(keys)
    if tab is None:
        tab = _TABLES[keys] = PolicyTable(keys)
    return tab


def table_classes(tab: PolicyTable) -> tuple:
    """The policies of a token, in its order: the layout of the state tuple the kernels get
    with it (policies.state_layout)."""
    return tuple(by_kernel_key(key) for _, key in tab.keys)


def check_kernels(policy: str) -> None:
    """InputError unless the CPU engine can run `policy` (it has numba hooks)."""
    if not policy_class(policy).kernels:
        raise InputError(f"policy {policy!r} has no CPU kernel hooks (reference engine only)")


def _chain(tab, make_call, params: str, default: str):
    """impl(policies, code, <params>): `if code == c: <call of that policy>` for every policy of the
    table whose `make_call(cls)` is not None (a Python expression over f<i> and the params),
    else `default`."""
    if not isinstance(tab, PolicyTableType):
        return None
    lines, ns = [f"def impl(policies, code{params}):"], {}
    classes = [by_kernel_key(key) for _, key in tab.policy_keys]
    offsets = slot_offsets(classes)
    for i, (code, key) in enumerate(tab.policy_keys):
        call = make_call(classes[i], f"f{i}", ns)
        if call is not None and classes[i].slots:
            # a policy with slots of its own gets the tuple of just those (ps[0] its first)
            o = offsets[classes[i].name]
            own = "(" + "".join(f"ps[{o + j}], " for j in range(len(classes[i].slots))) + ")"
            call = call.replace("(ps,", f"({own},", 1)
        if call is not None:
            lines.append(f"    if code == {int(code)}:")
            lines.append(f"        return {call}")
    lines.append(f"    return {default}")
    exec("\n".join(lines), ns)  # the chain over the registry's policies, compiled by numba
    return ns["impl"]


def _hook(name: str, args: str):
    def make_call(cls, fname, ns):
        fn = cls.kernels.get(name)
        if fn is None:
            return None
        ns[fname] = fn
        return f"{fname}({args})"
    return make_call


def _trait(name: str):
    def make_call(cls, fname, ns):
        return "True" if getattr(cls, name) else None
    return make_call


# ---- the hooks (pure-Python stubs: they only exist inside numba kernels) ----------------------
def long_lookahead(policies, code):
    raise NotImplementedError("a numba kernel hook")


def admission(policies, code):
    raise NotImplementedError("a numba kernel hook")


def on_hit(policies, code, ps, sl, now):
    raise NotImplementedError("a numba kernel hook")


def choose_victim(policies, code, ps, si, base, ways, t, window, pagerank, tag):
    """Way (0..ways-1) to evict from the full set si whose slots start at `base`. Mutates only
    policy state (round-robin counter, SIEVE visited bits and hand)."""
    raise NotImplementedError("a numba kernel hook")


def admit(policies, code, ps, in_tag, in_pr, sl, t, pagerank, tag):
    """May the miss (its tag and PageRank byte) replace the victim in slot sl?"""
    raise NotImplementedError("a numba kernel hook")


def on_evict(policies, code, ps, sl, si, base):
    raise NotImplementedError("a numba kernel hook")


def on_fill(policies, code, ps, sl, si, base, w, now):
    raise NotImplementedError("a numba kernel hook")


@overload(long_lookahead, jit_options=_HOOK_JIT)
def _long_lookahead(policies, code):
    return _chain(policies, _trait("long_lookahead"), "", "False")


@overload(admission, jit_options=_HOOK_JIT)
def _admission(policies, code):
    return _chain(policies, _trait("admission"), "", "False")


_VICTIM = "ps, si, base, ways, t, window, pagerank, tag"
_ADMIT = "ps, in_tag, in_pr, sl, t, pagerank, tag"


@overload(on_hit, jit_options=_HOOK_JIT)
def _on_hit(policies, code, ps, sl, now):
    return _chain(policies, _hook("on_hit", "ps, sl, now"), ", ps, sl, now", "None")


@overload(choose_victim, jit_options=_HOOK_JIT)
def _choose_victim(policies, code, ps, si, base, ways, t, window, pagerank, tag):
    return _chain(policies, _hook("victim", _VICTIM), ", " + _VICTIM, "-1")


@overload(admit, jit_options=_HOOK_JIT)
def _admit(policies, code, ps, in_tag, in_pr, sl, t, pagerank, tag):
    return _chain(policies, _hook("admit", _ADMIT), ", " + _ADMIT, "True")


@overload(on_evict, jit_options=_HOOK_JIT)
def _on_evict(policies, code, ps, sl, si, base):
    return _chain(policies, _hook("on_evict", "ps, sl, si, base"), ", ps, sl, si, base", "None")


@overload(on_fill, jit_options=_HOOK_JIT)
def _on_fill(policies, code, ps, sl, si, base, w, now):
    return _chain(policies, _hook("on_fill", "ps, sl, si, base, w, now"), ", ps, sl, si, base, w, now", "None")
