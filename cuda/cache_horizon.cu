// The long lookahead of the horizon policy (docs/cache-semantics.md §2, lsm_gnn/cache/policies/
// horizon.py). Needs cache_common.cuh prepended.
//
// Every iteration t, from the K window batches (batch k = iteration t + 1 + k):
//   cache_hz_next:  row_next[v / G] := min over the window of t + 1 + k, for every window id
//                   (atomicMin: independent of thread order);
//   cache_hz_tags:  every line's tag := row_next of its key (NO_REUSE for an empty line or a row
//                   without a request in the window), the tags the CPU engine keeps incrementally;
//   (the step: cache_fill tags a filled line with row_next of its row, and admission reads it)
//   cache_hz_clear: row_next := NO_REUSE again for every window id (it is NO_REUSE between steps).

extern "C" __global__ void cache_hz_next(const long long* win_ids, const long long* win_offsets, int nwin,
                                         long long t, long long G, int* row_next) {
    long long j = win_offsets[0] + (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= win_offsets[nwin]) return;
    int lo = 0, hi = nwin - 1;  // the last batch k with win_offsets[k] <= j (empty batches skip)
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (win_offsets[mid] <= j) lo = mid; else hi = mid - 1;
    }
    atomicMin(&row_next[win_ids[j] / G], (int)(t + 1 + lo));
}

extern "C" __global__ void cache_hz_tags(const long long* keys, long long lines, long long G, const int* row_next,
                                         TAG_T* tag) {
    long long s = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= lines) return;
    const long long k = keys[s];
    tag[s] = k >= 0 ? (TAG_T)row_next[k / G] : (TAG_T)NO_REUSE;
}

extern "C" __global__ void cache_hz_clear(const long long* win_ids, long long lo, long long hi, long long G,
                                          int* row_next) {
    long long j = lo + (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= hi) return;
    row_next[win_ids[j] / G] = (int)NO_REUSE;
}
