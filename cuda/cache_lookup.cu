// Dedupe, lookup and per-step counts of the GPU cache engine (docs/cache-semantics.md, steps 1-2).
// Needs cache_common.cuh prepended. One thread per request or per distinct id.
//
// Dedupe in order of first occurrence, as the CPU engine: every request i of the batch writes
// atomicMin(row_first[v / G], i), so the row holds the first position of v; the flags
// "row_first == i" mark first occurrences, an inclusive scan of the flags (cache_scan_*, which
// leaves their number nd in P[P_ND]) numbers them 1..nd in batch order, and the distinct index of
// request i is the number of its first occurrence. row_first is reset to NONE_POS afterwards (it
// is NONE_POS between steps). Counts come from the step's parameter block P on the device
// (n = P[P_N], nd = P[P_ND], t = P[P_T]): the grids cover an upper bound and no count goes back
// to the host.

extern "C" __global__ void cache_dedupe_first(const long long* batch, const long long* P, long long G,
                                              int* row_first) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= P[P_N]) return;
    atomicMin(&row_first[batch[i] / G], (int)i);
}

extern "C" __global__ void cache_dedupe_flag(const long long* batch, const long long* P, long long G,
                                             const int* row_first, long long* flag) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= P[P_N]) return;
    flag[i] = row_first[batch[i] / G] == (int)i ? 1 : 0;
}

// scan: inclusive scan of the flags. distinct[d] = d-th first occurrence; inverse[i] = d of v.
extern "C" __global__ void cache_dedupe_scatter(const long long* batch, const long long* P, long long G,
                                                const int* row_first, const long long* scan,
                                                long long* distinct, long long* inverse) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= P[P_N]) return;
    int first = row_first[batch[i] / G];
    if (first == (int)i) distinct[scan[i] - 1] = batch[i];
    inverse[i] = scan[first] - 1;
}

extern "C" __global__ void cache_dedupe_reset(const long long* distinct, const long long* P, long long G,
                                              int* row_first) {
    long long d = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (d >= P[P_ND]) return;
    row_first[distinct[d] / G] = NONE_POS;
}

// Every distinct id against the cache state at the start of the batch: a resident line is a hit
// (the policy's on_hit hook: LRU stamp := t + 1, SIEVE visited := 1; hits run in parallel, so
// an on_hit touches only its own slot); else an id in the PVP landing buffer is a victim hit (src
// = its first position there); else a storage read. The policy state arrays (the mark below)
// come in STATE_ORDER (lsm_gnn/cache/policies/base.py), then the GPU policies' own slots
// (lsm_gnn/cache/gpu_codegen.py: state_params; a test holds the parameters to it).
extern "C" __global__ void cache_lookup(const long long* distinct, const long long* P, long long G,
                                        int code, const int* row_slot, const int* row_land,
                                        KERNEL_STATE_PARAMS,
                                        signed char* status, long long* slot, long long* src,
                                        long long* evicted, long long* spill) {
    long long d = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (d >= P[P_ND]) return;
    const long long now = P[P_T] + 1;
    long long loc = distinct[d] / G;
    int s = row_slot[loc];
    evicted[d] = -1;
    spill[d] = NOT_SPILLED;
    if (s >= 0) {
        status[d] = STATUS_HIT;
        slot[d] = s;
        src[d] = -1;
        const PolicyState ps = POLICY_STATE_OF_PARAMS;
        policy_on_hit(code, ps, s, now);
        return;
    }
    slot[d] = -1;
    int land = row_land[loc];
    if (land != NONE_POS) {
        status[d] = STATUS_VICTIM_HIT;
        src[d] = land;
    } else {
        status[d] = STATUS_STORAGE;
        src[d] = -1;
    }
}

__device__ __forceinline__ long long warp_sum(long long x) {
    for (int off = WARP_SIZE / 2; off > 0; off >>= 1) x += __shfl_xor_sync(FULL_MASK, x, off);
    return x;
}

// counts[0..6] += hits, victim hits, storage reads, evictions, spills, dropped spills, bypassed
// misses (not cached: slot -1), nd = P[P_ND]. Integer sums: the result does not depend on the
// order of the atomics. blockDim % 32 == 0.
extern "C" __global__ void cache_count(const signed char* status, const long long* evicted,
                                       const long long* spill, const long long* slot, const long long* P,
                                       long long* counts) {
    const long long nd = P[P_ND];
    long long c[7] = {0, 0, 0, 0, 0, 0, 0};
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long d = (long long)blockIdx.x * blockDim.x + threadIdx.x; d < nd; d += stride) {
        signed char st = status[d];
        c[0] += st == STATUS_HIT;
        c[1] += st == STATUS_VICTIM_HIT;
        c[2] += st == STATUS_STORAGE;
        c[3] += evicted[d] >= 0;
        c[4] += spill[d] >= 0;
        c[5] += spill[d] == SPILL_DROPPED;
        c[6] += st != STATUS_HIT && slot[d] < 0;
    }
    for (int k = 0; k < 7; ++k) {
        long long s = warp_sum(c[k]);
        if ((threadIdx.x & (WARP_SIZE - 1)) == 0 && s != 0)
            atomicAdd((unsigned long long*)&counts[k], (unsigned long long)s);
    }
}
