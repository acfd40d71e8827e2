// Victim spill (docs/cache-semantics.md, "Victim buffer and PVP"). Needs cache_common.cuh.
//
// The CPU engine appends spilled lines to queue q in order of first occurrence of the miss that
// evicted them, and drops a spill when its queue is full. cache_fill leaves the queue of every
// candidate in spill[d]; these passes reproduce that global order with a stable counting sort by
// queue, as the owner split does: each thread owns a contiguous chunk of d, counts its candidates
// per queue (pass 1), the host turns the queue-major table counts[q * n_chunks + c] into
// exclusive offsets (cupy.cumsum), so a candidate's rank inside its queue is known (pass 2); the
// spill records are then compacted in order of d (pass 3) and the queue counts advanced (pass 4).

extern "C" __global__ void cache_spill_count(const long long* spill, long long nd, long long chunk,
                                             long long n_chunks, long long* counts) {
    long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= n_chunks) return;
    long long end = (c + 1) * chunk < nd ? (c + 1) * chunk : nd;
    for (long long d = c * chunk; d < end; ++d) {
        long long q = spill[d];
        if (q >= 0) counts[q * n_chunks + c] += 1;  // column c belongs to this thread alone
    }
}

// starts: exclusive scan of counts; cursor: a copy of starts that this pass advances.
// A candidate of rank r in queue q lands at q_count[q] + r if that is below depth, else it is
// dropped (spill[d] := SPILL_DROPPED). ok[d] = 1 for the lines that land, dst_of[d] their row.
extern "C" __global__ void cache_spill_assign(long long* spill, const long long* evicted,
                                              long long nd, long long chunk, long long n_chunks,
                                              long long depth, const long long* starts,
                                              long long* cursor, const long long* q_count,
                                              long long* q_ids, long long* dst_of, long long* ok) {
    long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= n_chunks) return;
    long long end = (c + 1) * chunk < nd ? (c + 1) * chunk : nd;
    for (long long d = c * chunk; d < end; ++d) {
        ok[d] = 0;
        long long q = spill[d];
        if (q < 0) continue;
        long long rank = cursor[q * n_chunks + c]++ - starts[q * n_chunks];
        long long pos = q_count[q] + rank;
        if (pos < depth) {
            long long dst = q * depth + pos;
            q_ids[dst] = evicted[d];
            dst_of[d] = dst;
            ok[d] = 1;
        } else {
            spill[d] = SPILL_DROPPED;
        }
    }
}

// scan: inclusive scan of ok. Record k: the line of cache slot spill_slot[k] (the slot that the
// miss refilled) goes to victim-queue row spill_dst[k].
extern "C" __global__ void cache_spill_commit(const long long* ok, const long long* scan,
                                              const long long* dst_of, const long long* slot,
                                              long long nd, long long* spill_slot,
                                              long long* spill_dst) {
    long long d = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (d >= nd || !ok[d]) return;
    long long k = scan[d] - 1;
    spill_slot[k] = slot[d];
    spill_dst[k] = dst_of[d];
}

extern "C" __global__ void cache_spill_advance(const long long* counts, long long n_chunks,
                                               long long window, long long depth,
                                               long long* q_count) {
    long long q = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (q >= window) return;
    long long total = q_count[q];
    for (long long c = 0; c < n_chunks; ++c) total += counts[q * n_chunks + c];
    q_count[q] = total < depth ? total : depth;
}
