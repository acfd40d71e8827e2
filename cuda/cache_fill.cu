// Misses: grouping by set, victim choice per policy, eviction and fill (docs/cache-semantics.md,
// step 3 and "Victim choice"). Needs cache_common.cuh, cuda/policies/*.cuh and the policy dispatch
// prepended (gpu_codegen.module_source; the dispatch is generated from the registry by
// gpu_codegen.policy_dispatch): every policy decision is a policy_* hook, every trait a policy_*
// predicate, so nothing here names a policy.
//
// The CPU engine serves misses one by one in order of first occurrence. Sets are independent, so
// the GPU engine groups the misses by set, keeping that order inside each set (a stable counting
// sort of the distinct ids by set, cache_scan.cu, hits in a last bucket `sets`), and one warp
// serves one set's misses one after the other. Every decision inside a set then sees exactly the state the CPU engine sees.
// Victim choice is a warp reduction of (key, way) pairs: the minimum key, ties to the lowest way,
// which is the CPU engine's "first way with the best value" for every ordered policy.

// Sort keys: a miss d gets its set, a hit the last bucket `sets` (after every miss); val[d] = d.
extern "C" __global__ void cache_miss_keys(const long long* distinct, const signed char* status,
                                           const long long* P, long long G, long long sets,
                                           long long* bucket, long long* val) {
    long long d = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (d >= P[P_ND]) return;
    bucket[d] = status[d] == STATUS_HIT ? sets : (distinct[d] / G) % sets;
    val[d] = d;
}

// flag[j] = 1 where sorted position j starts the misses of a set (sset: the sorted buckets).
extern "C" __global__ void cache_segment_flags(const long long* sset, const long long* P, long long sets,
                                               long long* flag) {
    long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= P[P_ND]) return;
    long long s = sset[j];
    flag[j] = (s < sets && (j == 0 || sset[j - 1] != s)) ? 1 : 0;
}

// out[scan[j] - 1] = j for every flagged j < nd (scan: inclusive scan of flag).
extern "C" __global__ void cache_compact_positions(const long long* flag, const long long* scan,
                                                   const long long* P, long long* out) {
    long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= P[P_ND]) return;
    if (flag[j]) out[scan[j] - 1] = j;
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

// One warp per set that has misses (seg_begin: first sorted position of each such set; their
// number nseg = P[P_NSEG], the grid an upper bound; sset / sd: the sorted sets and ids). Lane 0
// makes every write; the other lanes only take part in the victim reduction. blockDim % 32 == 0.
// spill[d] receives the queue of a spill candidate (evicted with a known reuse still ahead and
// at most W iterations away, resident since before the batch, PVP on); cache_spill_* decide later, in order of first occurrence,
// which candidates fit. A policy with admission control (horizon) may refuse the miss: slot[d]
// stays -1 and nothing is evicted. row_next: a long-lookahead policy's next request of each row
// (cache_horizon.cu; unused by the other policies), which also tags the line it fills (others:
// FRESH). The policy state arrays (the mark below, written out by gpu_codegen) come in STATE_ORDER (lsm_gnn/cache/policies/base.py),
// then the slots of the GPU policies that keep their own (lsm_gnn/cache/gpu_codegen.py: state_params).
// A way outside [0, ways) (a negative fill count, or a policy hook that found its state corrupt
// and returned -1, e.g. a SIEVE list that leaves the set) is never used: the warp counts the set
// in counts[CORRUPT_COUNT] and stops serving it; the host raises (the CPU engine checks the same).
extern "C" __global__ void cache_fill(
        const long long* sset, const long long* sd, const long long* P, const long long* seg_begin,
        const long long* distinct, long long G, long long sets, int ways, int code, long long window, int pvp, long long* keys, unsigned char* pagerank, TAG_T* tag,
        KERNEL_STATE_PARAMS, int* set_fill, int* row_slot,
        const unsigned char* static_scores, const int* row_next, const int* row_first,
        const long long* inverse, const signed char* status, long long* slot, long long* evicted,
        long long* spill, long long* counts) {
    long long seg = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / WARP_SIZE;
    int lane = threadIdx.x & (WARP_SIZE - 1);
    if (seg >= P[P_NSEG]) return;  // uniform per warp
    const long long nd = P[P_ND], t = P[P_T];
    long long j = seg_begin[seg];
    const long long si = sset[j];
    const long long base = si * ways;
    const long long now = t + 1;
    const PolicyState ps = POLICY_STATE_OF_PARAMS;
    const bool long_lookahead = policy_long_lookahead(code);
    for (; j < nd && sset[j] == si; ++j) {
        const long long d = sd[j];
        const long long v = distinct[d];
        // the tag the line will take: a long-lookahead policy knows the row's next request, others FRESH
        const long long in_tag = long_lookahead ? (long long)row_next[v / G] : FRESH;
        int f = 0;
        if (lane == 0) f = set_fill[si];
        f = __shfl_sync(FULL_MASK, f, 0);
        int w;
        if (f < ways) {  // a set that is not full fills its lowest empty way
            w = f;
            if (lane == 0) set_fill[si] = f + 1;
        } else {
            if (policy_lane0_victim(code)) {
                int pick = 0;
                if (lane == 0) pick = policy_lane0_pick(code, ps, si, base, ways, pagerank, tag, t, window);
                w = __shfl_sync(FULL_MASK, pick, 0);
            } else {
                long long best = 9223372036854775807LL;
                int best_way = 2147483647;
                for (int x = lane; x < ways; x += WARP_SIZE) {  // ascending: strict < keeps lowest
                    long long k = policy_victim_key(code, ps, pagerank, tag, base + x, t, window);
                    if (k < best) {
                        best = k;
                        best_way = x;
                    }
                }
                warp_min_pair(best, best_way);
                w = best_way;
            }
        }
        if (w < 0 || w >= ways) {  // uniform per warp (w comes from lane 0 or the reduction)
            if (lane == 0) atomicAdd((unsigned long long*)&counts[CORRUPT_COUNT], 1ull);
            return;
        }
        if (f >= ways) {
            int admit = 1;
            if (lane == 0 && policy_admission(code))
                admit = policy_admit(code, ps, in_tag, static_scores[v], base + w, t, pagerank, tag);
            admit = __shfl_sync(FULL_MASK, admit, 0);
            if (!admit) {  // not cached: served from the read buffer, nothing evicted (slot stays -1)
                __syncwarp();
                continue;
            }
            if (lane == 0) {
                const long long sl = base + w;
                const long long ev = keys[sl];
                evicted[d] = ev;
                row_slot[ev / G] = -1;
                if (pvp) {
                    const long long te = (long long)tag[sl];
                    // a line filled in this batch (its id is a miss of the batch: row_first still
                    // holds its first request) has no row yet and is never spilled
                    const int first = row_first[ev / G];
                    const bool filled_now = first != NONE_POS && status[inverse[first]] != STATUS_HIT;
                    if (te != NO_REUSE && te != FRESH && te > t && te <= t + window && !filled_now)
                        spill[d] = te % window;
                }
                policy_on_evict(code, ps, sl, si, base);
            }
        }
        if (lane == 0) {
            const long long sl = base + w;
            keys[sl] = v;
            row_slot[v / G] = (int)sl;
            pagerank[sl] = static_scores[v];
            tag[sl] = (TAG_T)in_tag;
            policy_on_fill(code, ps, sl, si, base, w, now);
            slot[d] = sl;
        }
        __syncwarp();  // lane 0's writes are seen by the whole warp in the next miss
    }
}
