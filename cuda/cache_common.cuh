// Shared definitions of the GPU cache engine (lsm_gnn/cache/gpu_engine.py). Its one source,
// lsm_gnn/cache/gpu_codegen.py's module_source(), puts this file (then the policy state struct,
// cuda/policies/*.cuh and the policy dispatch, both generated from the registry) before every
// cuda/cache_*.cu source (no #include, so CuPy's kernel cache, keyed on the source text, sees
// every change), and before it a block of #defines generated from the Python constants
// (gpu_codegen.constant_defines: window.NO_REUSE, FRESH, TAG_DTYPE, the policy codes POLICY_<NAME>
// of the registry, the statuses), so the two engines cannot drift apart. The defaults below are
// those values at the time of writing, for a compile of this header on its own; the policy codes
// have none (only the registry numbers them).
#ifndef TAG_T
#define TAG_T int                            // window.TAG_DTYPE (int32 tags)
#endif
#ifndef NO_REUSE
#define NO_REUSE 2147483647LL                // window.NO_REUSE: no request inside the window
#endif
#ifndef FRESH
#define FRESH 2147483646LL                   // window.FRESH: filled since the last refresh
#endif
#ifndef STATUS_HIT
#define STATUS_HIT 0                         // engine.HIT / VICTIM_HIT / STORAGE
#define STATUS_VICTIM_HIT 1
#define STATUS_STORAGE 2
#endif
#ifndef NOT_SPILLED
#define NOT_SPILLED -1                       // engine.NOT_SPILLED / SPILL_DROPPED
#define SPILL_DROPPED -2
#endif
#ifndef CORRUPT_COUNT
#define CORRUPT_COUNT 7                      // gpu_codegen.CORRUPT_COUNT: counts[] slot of corrupt sets
#endif
#define NONE_POS 2147483647                  // "no position" in row_first / row_land (int32)
#ifndef P_N
// the step's parameter block P (gpu_codegen.PARAMS): counts the step computes, then what the host
// uploads (t, n, the window's batches and absolute offsets)
#define P_ND 0
#define P_NSEG 1
#define P_NSP 10
#define P_COUNTS 2
#define P_COMPUTED 16
#define P_T 16
#define P_N 17
#define P_NWIN 18
#define P_WOFF 19
#define SCAN_ITEMS 8
#define SCAN_TILE 256
#define RANK_ROUNDS 8
#define RANK_TILE 256
#endif

#define FULL_MASK 0xffffffffu
#define WARP_SIZE 32

// The tag as every rule reads it in iteration t: an expired known tag means no reuse.
__device__ __forceinline__ long long effective_tag(long long tag, long long t) {
    return tag <= t ? NO_REUSE : tag;
}

// tag := min(tag, v) for 32- or 64-bit tags (tags are >= 0: the unsigned minimum is the signed one)
__device__ __forceinline__ void tag_min(int* p, long long v) { atomicMin(p, (int)v); }
__device__ __forceinline__ void tag_min(long long* p, long long v) {
    atomicMin((unsigned long long*)p, (unsigned long long)v);
}

// The window batch k of window position P[P_WOFF] + i (the last k with offsets[k] <= it: empty
// batches skip), -1 past the window (P[P_NWIN] batches, offsets P[P_WOFF .. P_WOFF + nwin]).
__device__ __forceinline__ int window_batch(const long long* P, long long i) {
    const int nwin = (int)P[P_NWIN];
    const long long* off = P + P_WOFF;
    if (nwin <= 0 || off[0] + i >= off[nwin]) return -1;
    const long long j = off[0] + i;
    int lo = 0, hi = nwin - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (off[mid] <= j) lo = mid; else hi = mid - 1;
    }
    return lo;
}
