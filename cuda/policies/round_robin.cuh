// Round robin (lsm_gnn/cache/policies/round_robin.py): the per-set counter modulo ways, advanced
// on every eviction (FIFO once the set is full). Lane 0 only.
__device__ __forceinline__ int rr_victim(long long* rr, long long si, int ways) {
    int way = (int)(rr[si] % ways);
    rr[si] += 1;
    return way;
}
