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

// The window (offsets, nwin) and t come from the step's parameter block P (window_batch).
extern "C" __global__ void cache_hz_next(const long long* win_ids, const long long* P, long long G, int* row_next) {
    const int k = window_batch(P, (long long)blockIdx.x * blockDim.x + threadIdx.x);
    if (k < 0) return;
    const long long j = P[P_WOFF] + (long long)blockIdx.x * blockDim.x + threadIdx.x;
    atomicMin(&row_next[win_ids[j] / G], (int)(P[P_T] + 1 + k));
}

extern "C" __global__ void cache_hz_tags(const long long* keys, long long lines, long long G, const int* row_next,
                                         TAG_T* tag) {
    long long s = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= lines) return;
    const long long k = keys[s];
    tag[s] = k >= 0 ? (TAG_T)row_next[k / G] : (TAG_T)NO_REUSE;
}

extern "C" __global__ void cache_hz_clear(const long long* win_ids, const long long* P, long long G, int* row_next) {
    if (window_batch(P, (long long)blockIdx.x * blockDim.x + threadIdx.x) < 0) return;
    const long long j = P[P_WOFF] + (long long)blockIdx.x * blockDim.x + threadIdx.x;
    row_next[win_ids[j] / G] = (int)NO_REUSE;
}
