// LRU (lsm_gnn/cache/policies/lru.py): stamp := t + 1 on every hit and fill; the lowest stamp goes.
__device__ __forceinline__ void lru_touch(long long* stamp, long long sl, long long now) { stamp[sl] = now; }
__device__ __forceinline__ long long lru_key(const long long* stamp, long long sl) { return stamp[sl]; }
