// SIEVE (lsm_gnn/cache/policies/sieve.py; Zhang et al., NSDI'24) per set: a FIFO list of ways from
// the tail (oldest) to the head (newest), visited bits and a hand. Lane 0 only.
__device__ __forceinline__ void sieve_on_hit(unsigned char* visited, long long sl) { visited[sl] = 1; }

// The hand walks from its position (or the tail) towards the head, clearing visited bits, and
// stops at the first unvisited line; the hand then rests on the next newer line.
__device__ int sieve_victim(long long si, long long base, unsigned char* visited, const int* newer,
                            const int* tail, int* hand) {
    int p = hand[si] >= 0 ? hand[si] : tail[si];
    while (visited[base + p]) {
        visited[base + p] = 0;
        p = newer[base + p] >= 0 ? newer[base + p] : tail[si];
    }
    hand[si] = newer[base + p];
    return p;
}

// unlink the victim from the set's list
__device__ __forceinline__ void sieve_on_evict(long long sl, long long si, long long base, int* newer, int* older,
                                               int* head, int* tail) {
    const int nw = newer[sl], ow = older[sl];
    if (nw >= 0) older[base + nw] = ow; else head[si] = ow;
    if (ow >= 0) newer[base + ow] = nw; else tail[si] = nw;
}

// the new line becomes the head (newest), unvisited
__device__ __forceinline__ void sieve_on_fill(long long sl, long long si, long long base, int w,
                                              unsigned char* visited, int* newer, int* older, int* head,
                                              int* tail) {
    visited[sl] = 0;
    older[sl] = head[si];
    newer[sl] = -1;
    if (head[si] >= 0) newer[base + head[si]] = w; else tail[si] = w;
    head[si] = w;
}
