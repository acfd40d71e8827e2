// Round robin (lsm_gnn/cache/policies/round_robin.py): the per-set counter modulo ways, advanced
// on every eviction (FIFO once the set is full). victim_choice "scan": lane 0 only.
__device__ __forceinline__ int round_robin_victim(PolicyState ps, long long si, long long base, int ways,
                                                  const unsigned char* pagerank, const TAG_T* tag, long long t,
                                                  long long window) {
    if (ps.rr[si] < 0) return -1;  // corrupt counter (C's % would give a negative way; Python's not)
    int way = (int)(ps.rr[si] % ways);
    ps.rr[si] += 1;
    return way;
}
