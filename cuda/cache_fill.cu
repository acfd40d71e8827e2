// Misses: grouping by set, victim choice per policy, eviction and fill (docs/cache-semantics.md,
// step 3 and "Victim choice"). Needs cache_common.cuh prepended.
//
// The CPU engine serves misses one by one in order of first occurrence. Sets are independent, so
// the GPU engine groups the misses by set, keeping that order inside each set (a sort of the
// unique keys set * nd + d, see cache_miss_keys), and one warp serves one set's misses one after
// the other. Every decision inside a set then sees exactly the state the CPU engine sees.
// Victim choice is a warp reduction of (key, way) pairs: the minimum key, ties to the lowest way,
// which is the CPU engine's "first way with the best value" for every ordered policy.

// Sort keys: a miss d in set s gets s * nd + d; a hit gets sets * nd + d (after every miss).
extern "C" __global__ void cache_miss_keys(const long long* distinct, const signed char* status,
                                           long long nd, long long G, long long sets,
                                           long long* keys) {
    long long d = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (d >= nd) return;
    long long s = status[d] == STATUS_HIT ? sets : (distinct[d] / G) % sets;
    keys[d] = s * nd + d;
}

// flag[j] = 1 where sorted position j starts the misses of a set.
extern "C" __global__ void cache_segment_flags(const long long* sorted, long long nd, long long sets,
                                               long long* flag) {
    long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= nd) return;
    long long s = sorted[j] / nd;
    flag[j] = (s < sets && (j == 0 || sorted[j - 1] / nd != s)) ? 1 : 0;
}

// out[scan[j] - 1] = j for every flagged j (scan: inclusive scan of flag).
extern "C" __global__ void cache_compact_positions(const long long* flag, const long long* scan,
                                                   long long n, long long* out) {
    long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n) return;
    if (flag[j]) out[scan[j] - 1] = j;
}

// The value a policy minimises over the ways of a full set (ties: lowest way).
//   static: PageRank byte. dynamic: -(effective tag), i.e. farthest reuse first.
//   hybrid: (case rank, PageRank) with rank none 0, far 1, fresh 2, near 3; hybrid_pvp: far 0,
//   none 1, fresh 2, near 3 (the same ranks as policies.choose_victim). lru: stamp.
__device__ __forceinline__ long long victim_key(int code, long long sl, long long t, long long lim,
                                                const unsigned char* pagerank,
                                                const TAG_T* tag, const long long* stamp) {
    if (code == POLICY_STATIC) return (long long)pagerank[sl];
    if (code == POLICY_DYNAMIC) return -effective_tag(tag[sl], t);
    if (code == POLICY_HYBRID || code == POLICY_HYBRID_PVP) {
        long long tg = (long long)tag[sl];
        long long none = (tg == NO_REUSE || tg <= t) ? 1 : 0;
        long long far = (tg > lim && tg < FRESH) ? 1 : 0;  // known reuse r = tg - t - 1 > W / 8
        long long fresh = tg == FRESH ? 1 : 0;
        long long w_none = code == POLICY_HYBRID ? 3 : 2;
        long long w_far = code == POLICY_HYBRID ? 2 : 3;
        long long rank = 3 - w_none * none - w_far * far - fresh;
        return (rank << 8) | (long long)pagerank[sl];
    }
    return stamp[sl];  // POLICY_LRU
}

__device__ __forceinline__ void warp_min_pair(long long& key, int& way) {
    for (int off = WARP_SIZE / 2; off > 0; off >>= 1) {
        long long k2 = __shfl_xor_sync(FULL_MASK, key, off);
        int w2 = __shfl_xor_sync(FULL_MASK, way, off);
        if (k2 < key || (k2 == key && w2 < way)) {
            key = k2;
            way = w2;
        }
    }
}

// SIEVE (one lane): the hand walks from the tail (oldest) towards the head, clearing visited
// bits, and stops at the first unvisited line; the hand then rests on the next newer line.
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

// One warp per set that has misses (seg_begin: first sorted position of each such set). Lane 0
// makes every write; the other lanes only take part in the victim reduction. blockDim % 32 == 0.
// spill[d] receives the queue of a spill candidate (evicted with a known, unexpired reuse tag,
// PVP on); cache_spill_* decide later, in order of first occurrence, which candidates fit.
extern "C" __global__ void cache_fill(
        const long long* sorted, long long nd, const long long* seg_begin, long long nseg,
        const long long* distinct, long long G, long long sets, int ways, int code, long long t,
        long long window, int pvp, long long* keys, unsigned char* pagerank, TAG_T* tag,
        long long* stamp, unsigned char* visited, int* newer, int* older, int* set_fill,
        long long* rr, int* head, int* tail, int* hand, int* row_slot,
        const unsigned char* static_scores, long long* slot, long long* evicted, long long* spill) {
    long long seg = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / WARP_SIZE;
    int lane = threadIdx.x & (WARP_SIZE - 1);
    if (seg >= nseg) return;  // uniform per warp
    long long j = seg_begin[seg];
    const long long si = sorted[j] / nd;
    const long long base = si * ways;
    const long long now = t + 1;
    const long long lim = t + 1 + window / 8;
    for (; j < nd && sorted[j] / nd == si; ++j) {
        const long long d = sorted[j] % nd;
        const long long v = distinct[d];
        int f = 0;
        if (lane == 0) f = set_fill[si];
        f = __shfl_sync(FULL_MASK, f, 0);
        int w;
        if (f < ways) {  // a set that is not full fills its lowest empty way
            w = f;
            if (lane == 0) set_fill[si] = f + 1;
        } else {
            if (code == POLICY_RR || code == POLICY_SIEVE) {
                int pick = 0;
                if (lane == 0) {
                    if (code == POLICY_RR) {
                        pick = (int)(rr[si] % ways);
                        rr[si] += 1;
                    } else {
                        pick = sieve_victim(si, base, visited, newer, tail, hand);
                    }
                }
                w = __shfl_sync(FULL_MASK, pick, 0);
            } else {
                long long best = 9223372036854775807LL;
                int best_way = 2147483647;
                for (int x = lane; x < ways; x += WARP_SIZE) {  // ascending: strict < keeps lowest
                    long long k = victim_key(code, base + x, t, lim, pagerank, tag, stamp);
                    if (k < best) {
                        best = k;
                        best_way = x;
                    }
                }
                warp_min_pair(best, best_way);
                w = best_way;
            }
            if (lane == 0) {
                const long long sl = base + w;
                const long long ev = keys[sl];
                evicted[d] = ev;
                row_slot[ev / G] = -1;
                if (pvp) {
                    const long long te = (long long)tag[sl];
                    if (te != NO_REUSE && te != FRESH && te > t) spill[d] = te % window;
                }
                if (code == POLICY_SIEVE) {  // unlink the victim from the set's FIFO list
                    const int nw = newer[sl], ow = older[sl];
                    if (nw >= 0) older[base + nw] = ow; else head[si] = ow;
                    if (ow >= 0) newer[base + ow] = nw; else tail[si] = nw;
                }
            }
        }
        if (lane == 0) {
            const long long sl = base + w;
            keys[sl] = v;
            row_slot[v / G] = (int)sl;
            pagerank[sl] = static_scores[v];
            tag[sl] = (TAG_T)FRESH;
            if (code == POLICY_LRU) stamp[sl] = now;
            if (code == POLICY_SIEVE) {  // the new line becomes the head (newest)
                visited[sl] = 0;
                older[sl] = head[si];
                newer[sl] = -1;
                if (head[si] >= 0) newer[base + head[si]] = w; else tail[si] = w;
                head[si] = w;
            }
            slot[d] = sl;
        }
        __syncwarp();  // lane 0's writes are seen by the whole warp in the next miss
    }
}
