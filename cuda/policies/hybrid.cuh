// Hybrid and hybrid_pvp (lsm_gnn/cache/policies/hybrid.py): the minimum of (case rank, PageRank)
// with rank none 0, far 1, fresh 2, near 3 (hybrid_pvp: far 0, none 1, fresh 2, near 3).
// lim = t + 1 + W / 8: a known reuse r = tag - t - 1 > W / 8 is "far".
__device__ __forceinline__ long long hybrid_key(int code, const unsigned char* pagerank, const TAG_T* tag,
                                                long long sl, long long t, long long lim) {
    long long tg = (long long)tag[sl];
    long long none = (tg == NO_REUSE || tg <= t) ? 1 : 0;
    long long far = (tg > lim && tg < FRESH) ? 1 : 0;
    long long fresh = tg == FRESH ? 1 : 0;
    long long w_none = code == POLICY_HYBRID ? 3 : 2;
    long long w_far = code == POLICY_HYBRID ? 2 : 3;
    long long rank = 3 - w_none * none - w_far * far - fresh;
    return (rank << 8) | (long long)pagerank[sl];
}
