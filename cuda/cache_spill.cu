// Victim spill (docs/cache-semantics.md, "Victim buffer and PVP"). Needs cache_common.cuh and
// cache_scan.cu's warp ranking.
//
// The CPU engine appends spilled lines to queue q in order of first occurrence of the miss that
// evicted them, and drops a spill when its queue is full. cache_fill leaves the queue of every
// candidate in spill[d]; these passes reproduce that global order with a stable counting sort by
// queue: cache_digit_count counts each queue's candidates per tile of RANK_TILE distinct ids
// (queue-major table), its inclusive scan gives each (queue, tile) the rank of its first
// candidate inside the queue, and one warp per tile ranks its candidates with ballots
// (cache_spill_assign); the spill records are then compacted in order of d (a scan of ok,
// cache_spill_commit) and the queue counts advanced (cache_spill_advance). nd is P[P_ND].

// Rank of the first candidate of (q, tile) inside queue q: the exclusive start of (q, tile) minus
// that of (q, 0) (the inclusive scan at the end of queue q - 1's row).
__device__ __forceinline__ long long queue_row_start(const long long* scan, long long q, long long ntiles) {
    return q > 0 ? scan[q * ntiles - 1] : 0;
}

// A candidate of rank r in queue q lands at q_count[q] + r if that is below depth, else it is
// dropped (spill[d] := SPILL_DROPPED). ok[d] = 1 for the lines that land, dst_of[d] their row.
extern "C" __global__ void cache_spill_assign(long long* spill, const long long* evicted, const long long* P,
                                              int bits, long long ntiles, long long window, long long depth,
                                              long long* hist, const long long* scan, const long long* q_count,
                                              long long* q_ids, long long* dst_of, long long* ok) {
    const long long tile = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / WARP_SIZE;
    const int lane = threadIdx.x & (WARP_SIZE - 1);
    const long long nd = P[P_ND];
    if (tile >= ntiles || tile * RANK_TILE >= nd) return;  // uniform per warp
    for (long long q = lane; q < window; q += WARP_SIZE) {
        const long long c = q * ntiles + tile;
        hist[c] = scan[c] - hist[c] - queue_row_start(scan, q, ntiles);  // rank base of this tile in q
    }
    __syncwarp();
    for (int r = 0; r < RANK_ROUNDS; ++r) {
        const long long d = tile * RANK_TILE + (long long)r * WARP_SIZE + lane;
        const long long q = d < nd ? spill[d] : -1;
        const bool valid = q >= 0;
        const unsigned peers = warp_peers(valid ? q : 0, bits, valid);
        const long long c = q * ntiles + tile;
        if (d < nd) ok[d] = 0;
        if (valid) {
            const long long pos = q_count[q] + hist[c] + __popc(peers & lanes_below());
            if (pos < depth) {
                const long long dst = q * depth + pos;
                q_ids[dst] = evicted[d];
                dst_of[d] = dst;
                ok[d] = 1;
            } else {
                spill[d] = SPILL_DROPPED;
            }
        }
        __syncwarp();
        if (valid && (peers & lanes_below()) == 0u) hist[c] += __popc(peers);
        __syncwarp();
    }
}

// scan: inclusive scan of ok. Record k: the line of cache slot spill_slot[k] (the slot that the
// miss refilled) goes to victim-queue row spill_dst[k].
extern "C" __global__ void cache_spill_commit(const long long* ok, const long long* scan, const long long* dst_of,
                                              const long long* slot, const long long* P, long long* spill_slot,
                                              long long* spill_dst) {
    const long long d = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (d >= P[P_ND] || !ok[d]) return;
    const long long k = scan[d] - 1;
    spill_slot[k] = slot[d];
    spill_dst[k] = dst_of[d];
}

// scan: the inclusive scan of the queue-major table: queue q's candidates are its row's total.
extern "C" __global__ void cache_spill_advance(const long long* scan, long long ntiles, long long window,
                                               long long depth, long long* q_count) {
    const long long q = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (q >= window) return;
    const long long total = q_count[q] + scan[(q + 1) * ntiles - 1] - queue_row_start(scan, q, ntiles);
    q_count[q] = total < depth ? total : depth;
}
