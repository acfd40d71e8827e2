// Dynamic (lsm_gnn/cache/policies/dynamic.py): the farthest effective tag goes first
// (NO_REUSE > FRESH > any known reuse), i.e. the minimum of -(effective tag).
__device__ __forceinline__ long long dynamic_victim_key(PolicyState ps, const unsigned char* pagerank, const TAG_T* tag,
                                                        long long sl, long long t, long long window) {
    return -effective_tag(tag[sl], t);
}
