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

// One thread per window id j in [win_offsets[0], win_offsets[nwin]); batch k holds
// win_ids[win_offsets[k] : win_offsets[k + 1]] (offsets absolute into win_ids, nwin >= 1).
extern "C" __global__ void cache_tags_window(const long long* win_ids, const long long* win_offsets,
                                             int nwin, long long t, long long G,
                                             const int* row_slot, TAG_T* tag) {
    long long j = win_offsets[0] + (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= win_offsets[nwin]) return;
    int lo = 0, hi = nwin - 1;  // the last batch k with win_offsets[k] <= j (empty batches skip)
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (win_offsets[mid] <= j) lo = mid; else hi = mid - 1;
    }
    int s = row_slot[win_ids[j] / G];
    if (s >= 0) tag_min(&tag[s], t + 1 + lo);
}
