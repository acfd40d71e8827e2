"""The CUDA source of the GPU cache engine, generated from the Python side (lsm_gnn.cache.gpu_engine
compiles it; the compile checks, lsm_gnn.check.compile and lsm_gnn.check.nvrtc, read it).

One translation unit (`module_source`), in order: #defines of the constants the kernels share with
the CPU engine (`constant_defines`), cuda/cache_common.cuh, the row-copy loop, the `PolicyState`
struct generated from policies.STATE_SPECS and the slots of the GPU policies that keep their own
(`policy_state_source`; the kernels' state parameters, written where a kernel says
`KERNEL_STATE_PARAMS`, are the same list), every policy's
device hooks (cuda/policies/<its Python module>.cuh; a policy from outside the package: its
class's `cuda_source`), the dispatch that `policy_dispatch()` generates from the
registry (lsm_gnn.cache.policies: a switch on the policy code per hook that calls the policy's own
functions `<name>_<hook>`, with the signatures written in `CUDA_HOOKS`, and each trait a
`policy_*` predicate), then every cuda/cache_*.cu in name order. Text only: it imports without
CuPy or a GPU.
"""

from __future__ import annotations

import numpy as np

from lsm_gnn.cache import engine as _cpu, window as _win
from lsm_gnn.cache.policies import REGISTRY, policy_class, state_layout
from lsm_gnn.cache.window import TAG_DTYPE
from lsm_gnn.utils import cuda_sources
from lsm_gnn.utils.errors import InputError

COMMON_HEADER = "cache_common.cuh"
ROW_COPY_HEADER = "row_copy.cuh"  # the row-copy loop, shared with the reorder (multidevice.gpu)
POLICY_DIR = "policies"          # one header of device hooks per policy module
# counts[CORRUPT_COUNT] of the step's counts on the device: sets whose policy state cache_fill
# found corrupt (a victim or fill way outside the set); the host raises StateError
CORRUPT_COUNT = 7
# The step's parameter block P (int64, on the device; cache_common.cuh): [0, P_COMPUTED) the
# counts a step computes (distinct ids, sets with misses, the spill records, then counts[0..7] at
# P_COUNTS), read back one step late; from P_T what the host uploads before a step (t, n, the
# window's batches and their absolute offsets, P_WOFF + k). The kernels read every count from it,
# so none goes back to the host inside a step.
PARAMS = {"P_ND": 0, "P_NSEG": 1, "P_NSP": 10, "P_COUNTS": 2, "P_COMPUTED": 16, "P_T": 16, "P_N": 17,
          "P_NWIN": 18, "P_WOFF": 19}
# scans: one warp per tile of SCAN_TILE = 32 * SCAN_ITEMS elements; counting sort and spill ranks:
# one warp per tile of RANK_TILE = 32 * RANK_ROUNDS elements
SCAN_ITEMS, RANK_ROUNDS = 8, 8
SCAN_TILE, RANK_TILE = 32 * SCAN_ITEMS, 32 * RANK_ROUNDS


BUILTIN_PACKAGE = "lsm_gnn.cache.policies."  # the headers in cuda/policies/ are the built-in modules' only


def cuda_header(cls) -> str:
    """The CUDA header of a built-in policy: cuda/policies/<its Python module>.cuh."""
    return f"{POLICY_DIR}/{cls.__module__.rsplit('.', 1)[-1]}.cuh"


def is_builtin(cls) -> bool:
    return cls.__module__.startswith(BUILTIN_PACKAGE)


def gpu_policies() -> list:
    """The registered policies the GPU engine runs, in code order: numba hooks (the dispatch is
    generated from them) and CUDA hooks, a header in cuda/policies/ for a built-in module, the
    class's `cuda_source` for a policy from outside the package (whose module may share a built-in's
    name without borrowing its header)."""
    headers = set(cuda_sources.names(POLICY_DIR))
    return [cls for cls in REGISTRY.values() if cls.kernels
            and (cuda_header(cls) in headers if is_builtin(cls) else bool(cls.cuda_source))]


def check_gpu_policy(policy: str) -> None:
    """InputError, naming what is missing, unless the GPU engine can run `policy` (a registered
    name or one the resolver imports): its numba hooks and its CUDA hooks (a header in
    cuda/policies/, or `cuda_source` for a policy from outside the package). Needs no CuPy: the
    engine asks it before touching CUDA."""
    cls = policy_class(policy)
    if cls in gpu_policies():
        return
    where = f"{cls.__module__}:{cls.__qualname__}"
    lacks = []
    if not cls.kernels:
        lacks.append("numba hooks (`kernels`), from which the GPU dispatch is generated")
    if not is_builtin(cls):
        if not cls.cuda_source:
            lacks.append(f"CUDA hooks: a policy from outside the package gives them as its `cuda_source` (the "
                         f"functions {sorted(cuda_functions(cls).values())}, signatures of "
                         "lsm_gnn.cache.gpu_codegen.CUDA_HOOKS), and it has none")
    elif cuda_header(cls) not in set(cuda_sources.names(POLICY_DIR)):
        lacks.append(f"its CUDA header cuda/{cuda_header(cls)} defining {sorted(cuda_functions(cls).values())}")
    raise InputError(f"policy {cls.name!r} ({where}) cannot run on the GPU engine; it lacks {'; '.join(lacks)}. "
                     f"Run it with cache.engine=cpu (or --engine cpu); the GPU engine runs "
                     f"{sorted(c.name for c in gpu_policies())}")


def gpu_codes() -> set[int]:
    return {cls.code for cls in gpu_policies()}


def code_macro(cls) -> str:
    return f"POLICY_{cls.name.upper()}"


def constant_defines() -> str:
    """#defines of the constants the kernels share with the CPU engine, from the Python values
    (cache_common.cuh holds defaults for standalone compiles), and the code of every policy the
    GPU engine runs (POLICY_<NAME>, from the registry)."""
    tag_t = {np.dtype(np.int32): "int", np.dtype(np.int64): "long long"}[np.dtype(TAG_DTYPE)]
    values = {
        "NO_REUSE": f"{int(_win.NO_REUSE)}LL", "FRESH": f"{int(_win.FRESH)}LL",
        **{code_macro(cls): cls.code for cls in gpu_policies()},
        "STATUS_HIT": _cpu.HIT, "STATUS_VICTIM_HIT": _cpu.VICTIM_HIT,
        "STATUS_STORAGE": _cpu.STORAGE, "NOT_SPILLED": _cpu.NOT_SPILLED,
        "SPILL_DROPPED": _cpu.SPILL_DROPPED, "CORRUPT_COUNT": CORRUPT_COUNT, **PARAMS,
        "SCAN_ITEMS": SCAN_ITEMS, "SCAN_TILE": SCAN_TILE, "RANK_ROUNDS": RANK_ROUNDS, "RANK_TILE": RANK_TILE,
    }
    return f"#define TAG_T {tag_t}\n" + "".join(f"#define {k} {v}\n" for k, v in values.items())


C_TYPES = {np.dtype(np.int64): "long long", np.dtype(np.int32): "int", np.dtype(np.uint8): "unsigned char",
           np.dtype(np.int8): "signed char", np.dtype(np.int16): "short", np.dtype(np.uint16): "unsigned short",
           np.dtype(np.uint32): "unsigned int", np.dtype(np.uint64): "unsigned long long",
           np.dtype(np.float32): "float", np.dtype(np.float64): "double"}


def state_names(classes=None) -> list[str]:
    """The C names of the kernels' state arrays over the layout of the GPU policies (policies.
    state_layout): the built-in STATE_ORDER, then `<policy>_<slot>` for each slot."""
    classes = gpu_policies() if classes is None else classes
    return [key.replace(".", "_") for key, _, _ in state_layout(classes)]


def state_params(classes=None) -> list[str]:
    """The policy state parameters every kernel that calls a hook declares (KERNEL_STATE_PARAMS),
    in the layout's order: STATE_ORDER, then the GPU policies' slots."""
    classes = gpu_policies() if classes is None else classes
    out = []
    for (key, spec, owner), name in zip(state_layout(classes), state_names(classes)):
        dtype = np.dtype(spec[0] if owner is None else spec.dtype)
        if dtype not in C_TYPES:
            raise InputError(f"policy {owner!r}: state slot {key!r} has dtype {dtype}, which the GPU engine has no "
                             f"C type for; expected one of {sorted(str(d) for d in C_TYPES)}")
        out.append(f"{C_TYPES[dtype]}* {name}")
    return out


STATE_PARAMS_MARK = "KERNEL_STATE_PARAMS"
"""Where a kernel of cuda/cache_*.cu declares the state parameters; module_source writes them
there (state_params: text, not a macro, so every reader of a kernel's declaration sees them)."""


def policy_state_source() -> str:
    """struct PolicyState (one pointer per state array: policies.STATE_SPECS, then the GPU
    policies' slots as `<policy>_<slot>`) and POLICY_STATE_OF_PARAMS, its value from the kernel
    parameters of the same names."""
    fields = "".join(f"    {p};\n" for p in state_params())
    return ("// generated by lsm_gnn.cache.gpu_codegen.policy_state_source() from policies.STATE_SPECS and the slots\n"
            f"struct PolicyState {{\n{fields}}};\n"
            f"#define POLICY_STATE_OF_PARAMS {{{', '.join(state_names())}}}\n")


_PR_TAG = "const unsigned char* pagerank, const TAG_T* tag"
# hook -> (return type, parameters after the code, arguments, the policy function's suffix, default)
CUDA_HOOKS: dict[str, tuple[str, str, str, str, str]] = {
    "on_hit": ("void", "PolicyState ps, long long sl, long long now", "ps, sl, now", "on_hit", ""),
    "victim_key": ("long long", f"PolicyState ps, {_PR_TAG}, long long sl, long long t, long long window",
                   "ps, pagerank, tag, sl, t, window", "victim_key", "0"),
    "lane0_pick": ("int", f"PolicyState ps, long long si, long long base, int ways, {_PR_TAG}, long long t, "
                          "long long window", "ps, si, base, ways, pagerank, tag, t, window", "victim", "0"),
    "admit": ("int", f"PolicyState ps, long long in_tag, long long in_pr, long long sl, long long t, {_PR_TAG}",
              "ps, in_tag, in_pr, sl, t, pagerank, tag", "admit", "1"),
    "on_evict": ("void", "PolicyState ps, long long sl, long long si, long long base", "ps, sl, si, base",
                 "on_evict", ""),
    "on_fill": ("void", "PolicyState ps, long long sl, long long si, long long base, int w, long long now",
                "ps, sl, si, base, w, now", "on_fill", ""),
}


def cuda_functions(cls) -> dict[str, str]:
    """Dispatch hook -> the function `cls`'s CUDA header must define (`<name>_<suffix>`): its
    numba hooks, the victim as a key ("key") or a lane-0 walk ("scan")."""
    out = {}
    for hook in cls.kernels:
        if hook == "victim":
            hook = "victim_key" if cls.victim_choice == "key" else "lane0_pick"
        out[hook] = f"{cls.name}_{CUDA_HOOKS[hook][3]}"
    return out


def policy_dispatch() -> str:
    """The policy hooks and traits the cache kernels call, generated from the registry: for each
    hook a switch on the code over the GPU policies that define it (else the default: nothing,
    0, or admit), and the traits as predicates on the code (policy_long_lookahead,
    policy_admission, policy_lane0_victim)."""
    pols = gpu_policies()
    out = ["// generated by lsm_gnn.cache.gpu_codegen.policy_dispatch() from lsm_gnn.cache.policies"]
    for trait, test in (("long_lookahead", lambda c: c.long_lookahead), ("admission", lambda c: c.admission),
                        ("lane0_victim", lambda c: c.victim_choice == "scan")):
        cond = " || ".join(f"code == {code_macro(c)}" for c in pols if test(c)) or "false"
        out.append(f"__device__ __forceinline__ bool policy_{trait}(int code) {{ return {cond}; }}")
    for hook, (ret, params, args, _, default) in CUDA_HOOKS.items():
        body = [f"__device__ __forceinline__ {ret} policy_{hook}(int code, {params}) {{", "    switch (code) {"]
        for c in pols:
            fn = cuda_functions(c).get(hook)
            if fn is not None:
                call = f"{fn}({args})"
                body.append(f"    case {code_macro(c)}: " + (f"{call}; return;" if ret == "void" else f"return {call};"))
        body += ["    default: " + ("return;" if ret == "void" else f"return {default};"), "    }", "}"]
        out.append("\n".join(body))
    return "\n".join(out) + "\n"


def header_names() -> list[str]:
    """The headers every cache source needs, in order: the common header, then each policy's hooks
    (cuda/policies/*.cuh, name order); module_source puts the generated PolicyState before the
    policy headers and the generated dispatch after them."""
    return [COMMON_HEADER, ROW_COPY_HEADER] + cuda_sources.names(POLICY_DIR)


def module_files() -> list[str]:
    """The files of the one translation unit, in order: the headers, then every cuda/cache_*.cu."""
    return header_names() + [n for n in cuda_sources.names() if n.startswith("cache_") and n.endswith(".cu")]


def module_source() -> str:
    """The one translation unit the engine compiles: the constants, the common header, the row-copy
    loop, the policy state struct, the policy headers, the policy dispatch, then every cuda/cache_*.cu in name
    order (prepended rather than #included, so that CuPy's kernel cache, keyed on the source
    text, sees a change of a header)."""
    files = module_files()
    heads = [cuda_sources.read(n) for n in files if n.startswith(POLICY_DIR + "/")]
    params = ", ".join(state_params())
    units = [cuda_sources.read(n).replace(STATE_PARAMS_MARK, params) for n in files[2 + len(heads):]]
    outside = [f"// {cls.__module__}:{cls.__qualname__}.cuda_source\n{cls.cuda_source}" for cls in gpu_policies()
               if not is_builtin(cls)]  # after the built-in headers, before the dispatch that calls them
    return "\n".join([constant_defines(), cuda_sources.read(COMMON_HEADER), cuda_sources.read(ROW_COPY_HEADER),
                       policy_state_source()] + heads + outside + [policy_dispatch()] + units)


def defined_kernels() -> set[str]:
    """Names of the `extern "C" __global__` kernels in the cache sources."""
    return set(cuda_sources.kernels(module_source()))
