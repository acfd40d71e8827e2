// SIEVE (lsm_gnn/cache/policies/sieve.py; Zhang et al., NSDI'24) per set: a FIFO list of ways from
// the tail (oldest) to the head (newest), visited bits and a hand. victim_choice "scan": lane 0.
__device__ __forceinline__ void sieve_on_hit(PolicyState ps, long long sl, long long now) { ps.visited[sl] = 1; }

// The hand walks from its position (or the tail) towards the head, clearing visited bits, and
// stops at the first unvisited line; the hand then rests on the next newer line. A list of `ways`
// lines needs at most ways + 1 looks (each look clears a bit; once all are clear the next look
// stops), so the walk is bounded by that; a position or link outside the set (a corrupt list)
// returns -1, before anything outside the set is read or written (cache_fill then stops serving
// the set and the host raises). lsm_gnn/cache/policies/sieve.py:kernel_victim is the same walk.
__device__ int sieve_victim(PolicyState ps, long long si, long long base, int ways, const unsigned char* pagerank,
                            const TAG_T* tag, long long t, long long window) {
    const int hd = ps.head[si], tl = ps.tail[si];
    if (hd < -1 || hd >= ways || tl < -1 || tl >= ways) return -1;  // on_fill / the wrap use them
    int p = ps.hand[si] >= 0 ? ps.hand[si] : tl;
    for (int look = 0; look <= ways; ++look) {
        if (p < 0 || p >= ways) return -1;
        const int nw = ps.newer[base + p];
        if (nw < -1 || nw >= ways) return -1;
        if (!ps.visited[base + p]) {
            const int ow = ps.older[base + p];  // on_evict links nw and ow
            if (ow < -1 || ow >= ways) return -1;
            ps.hand[si] = nw;
            return p;
        }
        ps.visited[base + p] = 0;
        p = nw >= 0 ? nw : tl;
    }
    return -1;  // unreachable while every position is inside the set (see above)
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
