// LRU (lsm_gnn/cache/policies/lru.py): stamp := t + 1 on every hit and fill; the lowest stamp goes.
__device__ __forceinline__ void lru_on_hit(PolicyState ps, long long sl, long long now) { ps.stamp[sl] = now; }

__device__ __forceinline__ void lru_on_fill(PolicyState ps, long long sl, long long si, long long base, int w,
                                            long long now) {
    ps.stamp[sl] = now;
}

__device__ __forceinline__ long long lru_victim_key(PolicyState ps, const unsigned char* pagerank, const TAG_T* tag,
                                                    long long sl, long long t, long long window) {
    return ps.stamp[sl];
}
