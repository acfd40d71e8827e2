// Static (lsm_gnn/cache/policies/static.py): the lowest PageRank byte goes first.
__device__ __forceinline__ long long static_victim_key(PolicyState ps, const unsigned char* pagerank, const TAG_T* tag,
                                                       long long sl, long long t, long long window) {
    return (long long)pagerank[sl];
}
