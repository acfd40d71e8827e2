// The policy hooks the cache kernels call, dispatched by the policy code (the CUDA side of
// lsm_gnn/cache/policies/kernels.py). Each policy's own functions are in cuda/policies/<name>.cuh;
// gpu_engine.module_source() puts them, then this file, after cache_common.cuh.

// on_hit (cache_lookup): LRU stamps, SIEVE marks visited
__device__ __forceinline__ void policy_on_hit(int code, long long sl, long long now, long long* stamp,
                                              unsigned char* visited) {
    if (code == POLICY_LRU) lru_touch(stamp, sl, now);
    else if (code == POLICY_SIEVE) sieve_on_hit(visited, sl);
}

// policies whose victim is chosen sequentially by lane 0 (they mutate per-set state)
__device__ __forceinline__ bool policy_lane0_victim(int code) {
    return code == POLICY_RR || code == POLICY_SIEVE;
}

__device__ __forceinline__ int policy_lane0_pick(int code, long long si, long long base, int ways, long long* rr,
                                                 unsigned char* visited, const int* newer, const int* tail,
                                                 int* hand) {
    if (code == POLICY_RR) return rr_victim(rr, si, ways);
    return sieve_victim(si, base, visited, newer, tail, hand);
}

// The value the other policies minimise over the ways of a full set (ties: lowest way).
__device__ __forceinline__ long long policy_victim_key(int code, long long sl, long long t, long long lim,
                                                       const unsigned char* pagerank, const TAG_T* tag,
                                                       const long long* stamp) {
    if (code == POLICY_STATIC) return static_key(pagerank, sl);
    if (code == POLICY_DYNAMIC) return dynamic_key(tag, sl, t);
    if (code == POLICY_HYBRID || code == POLICY_HYBRID_PVP) return hybrid_key(code, pagerank, tag, sl, t, lim);
    if (code == POLICY_HORIZON) return horizon_key(pagerank, tag, sl, t);
    return lru_key(stamp, sl);  // POLICY_LRU
}

// admission control: may the miss (its tag and PageRank byte) replace the victim in slot sl?
__device__ __forceinline__ int policy_admit(int code, long long in_tag, long long in_pr, long long sl, long long t,
                                            const unsigned char* pagerank, const TAG_T* tag) {
    if (code == POLICY_HORIZON) return horizon_admit(in_tag, in_pr, sl, t, pagerank, tag);
    return 1;
}

__device__ __forceinline__ void policy_on_evict(int code, long long sl, long long si, long long base, int* newer,
                                                int* older, int* head, int* tail) {
    if (code == POLICY_SIEVE) sieve_on_evict(sl, si, base, newer, older, head, tail);
}

__device__ __forceinline__ void policy_on_fill(int code, long long sl, long long si, long long base, int w,
                                               long long now, long long* stamp, unsigned char* visited, int* newer,
                                               int* older, int* head, int* tail) {
    if (code == POLICY_LRU) lru_touch(stamp, sl, now);
    else if (code == POLICY_SIEVE) sieve_on_fill(sl, si, base, w, visited, newer, older, head, tail);
}
