// Reuse-tag update from the lookahead window (docs/cache-semantics.md, "Reuse tags").
// Needs cache_common.cuh prepended.
//
// Refresh in iteration t: every tag := NO_REUSE, then for every id v of window batch k
// (iteration t + 1 + k) that is resident, tag := min(tag, t + 1 + k). The minimum is an atomic,
// so the result does not depend on the order of the threads.

extern "C" __global__ void cache_tags_reset(TAG_T* tag, long long lines) {
    long long s = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= lines) return;
    tag[s] = NO_REUSE;
}

// One thread per window id j in [win_offsets[0], win_offsets[nwin]) (a grid over an upper bound);
// batch k holds win_ids[win_offsets[k] : win_offsets[k + 1]] (offsets absolute into win_ids). The
// offsets, nwin and t come from the step's parameter block P (window_batch, cache_common.cuh).
extern "C" __global__ void cache_tags_window(const long long* win_ids, const long long* P, long long G,
                                             const int* row_slot, TAG_T* tag) {
    const int k = window_batch(P, (long long)blockIdx.x * blockDim.x + threadIdx.x);
    if (k < 0) return;
    const long long j = P[P_WOFF] + (long long)blockIdx.x * blockDim.x + threadIdx.x;
    int s = row_slot[win_ids[j] / G];
    if (s >= 0) tag_min(&tag[s], P[P_T] + 1 + k);
}
