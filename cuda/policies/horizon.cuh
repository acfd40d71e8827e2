// Horizon (lsm_gnn/cache/policies/horizon.py): tags are the exact next request within K batches
// (cache_horizon.cu computes them every iteration); the lowest rank goes first: the PageRank byte
// for a line without a request in the lookahead, else 256 + (NO_REUSE - tag) (farther = lower).
// Admission: a miss whose own rank is not above the victim's is not cached.
__device__ __forceinline__ long long horizon_rank(long long tg, long long pr, long long t) {
    long long known = (tg > t && tg < FRESH) ? 1 : 0;
    return known * (256 + NO_REUSE - tg) + (1 - known) * pr;
}

__device__ __forceinline__ long long horizon_victim_key(PolicyState ps, const unsigned char* pagerank,
                                                        const TAG_T* tag, long long sl, long long t,
                                                        long long window) {
    return horizon_rank((long long)tag[sl], (long long)pagerank[sl], t);
}

__device__ __forceinline__ int horizon_admit(PolicyState ps, long long in_tag, long long in_pr, long long sl,
                                             long long t, const unsigned char* pagerank, const TAG_T* tag) {
    return horizon_rank(in_tag, in_pr, t) > horizon_rank((long long)tag[sl], (long long)pagerank[sl], t) ? 1 : 0;
}
