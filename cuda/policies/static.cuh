// Static (lsm_gnn/cache/policies/static.py): the lowest PageRank byte goes first.
__device__ __forceinline__ long long static_key(const unsigned char* pagerank, long long sl) {
    return (long long)pagerank[sl];
}
