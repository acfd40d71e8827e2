// Hybrid and hybrid_pvp (lsm_gnn/cache/policies/hybrid.py): the minimum of (case rank, PageRank)
// with rank = 3 - w_none * none - w_far * far - fresh: hybrid (w_none 3, w_far 2) none 0, far 1,
// fresh 2, near 3; hybrid_pvp (2, 3) far 0, none 1, fresh 2, near 3.
// lim = t + 1 + W / 8: a known reuse r = tag - t - 1 > W / 8 is "far".
__device__ __forceinline__ long long hybrid_ranked_key(long long w_none, long long w_far, const unsigned char* pagerank,
                                                       const TAG_T* tag, long long sl, long long t, long long window) {
    const long long lim = t + 1 + window / 8;
    long long tg = (long long)tag[sl];
    long long none = (tg == NO_REUSE || tg <= t) ? 1 : 0;
    long long far = (tg > lim && tg < FRESH) ? 1 : 0;
    long long fresh = tg == FRESH ? 1 : 0;
    long long rank = 3 - w_none * none - w_far * far - fresh;
    return (rank << 8) | (long long)pagerank[sl];
}

__device__ __forceinline__ long long hybrid_victim_key(PolicyState ps, const unsigned char* pagerank, const TAG_T* tag,
                                                       long long sl, long long t, long long window) {
    return hybrid_ranked_key(3, 2, pagerank, tag, sl, t, window);
}

__device__ __forceinline__ long long hybrid_pvp_victim_key(PolicyState ps, const unsigned char* pagerank,
                                                           const TAG_T* tag, long long sl, long long t,
                                                           long long window) {
    return hybrid_ranked_key(2, 3, pagerank, tag, sl, t, window);
}
