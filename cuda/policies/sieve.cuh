// SIEVE (lsm_gnn/cache/policies/sieve.py; Zhang et al., NSDI'24) per set: a FIFO list of ways from
// the tail (oldest) to the head (newest), visited bits and a hand. victim_choice "scan": lane 0.
__device__ __forceinline__ void sieve_on_hit(PolicyState ps, long long sl, long long now) { ps.visited[sl] = 1; }

// The hand walks from its position (or the tail) towards the head, clearing visited bits, and
// stops at the first unvisited line; the hand then rests on the next newer line.
__device__ int sieve_victim(PolicyState ps, long long si, long long base, int ways, const unsigned char* pagerank,
                            const TAG_T* tag, long long t, long long window) {
    int p = ps.hand[si] >= 0 ? ps.hand[si] : ps.tail[si];
    while (ps.visited[base + p]) {
        ps.visited[base + p] = 0;
        p = ps.newer[base + p] >= 0 ? ps.newer[base + p] : ps.tail[si];
    }
    ps.hand[si] = ps.newer[base + p];
    return p;
}

// unlink the victim from the set's list
__device__ __forceinline__ void sieve_on_evict(PolicyState ps, long long sl, long long si, long long base) {
    const int nw = ps.newer[sl], ow = ps.older[sl];
    if (nw >= 0) ps.older[base + nw] = ow; else ps.head[si] = ow;
    if (ow >= 0) ps.newer[base + ow] = nw; else ps.tail[si] = nw;
}

// the new line becomes the head (newest), unvisited
__device__ __forceinline__ void sieve_on_fill(PolicyState ps, long long sl, long long si, long long base, int w,
                                              long long now) {
    ps.visited[sl] = 0;
    ps.older[sl] = ps.head[si];
    ps.newer[sl] = -1;
    if (ps.head[si] >= 0) ps.newer[base + ps.head[si]] = w; else ps.tail[si] = w;
    ps.head[si] = w;
}
