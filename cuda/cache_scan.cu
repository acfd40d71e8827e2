// Device-sized scans and the stable counting sort of the GPU cache engine (docs/cache-semantics.md,
// steps 1 and 3; gpu_engine.py "No host sync"). Needs cache_common.cuh prepended.
//
// Every length here is read from device memory (the step's parameter block P, index `len_at`) or
// is a fixed bound known when the step is launched (`len_at` < 0: `len_fixed`), so a step launches
// every kernel over an upper bound (the batch's requests), never reads a count back to the host,
// and can be captured once as a CUDA graph. Scratch (tile sums, digit tables) is the engine's,
// allocated once for the largest batch.

__device__ __forceinline__ long long scan_len(const long long* P, int len_at, long long len_fixed) {
    return len_at >= 0 ? P[len_at] : len_fixed;
}

__device__ __forceinline__ long long warp_inclusive_scan(long long x) {
    const int lane = threadIdx.x & (WARP_SIZE - 1);
    for (int off = 1; off < WARP_SIZE; off <<= 1) {
        long long y = __shfl_up_sync(FULL_MASK, x, off);
        if (lane >= off) x += y;
    }
    return x;
}

// Pass 1 of an inclusive scan out[i] = in[0] + ... + in[i], i < len: one warp per tile of
// SCAN_TILE elements (SCAN_ITEMS consecutive ones per lane); tile_sums[tile] := the tile's total.
// in == out is allowed. blockDim % 32 == 0.
extern "C" __global__ void cache_scan_tiles(const long long* in, long long* out, const long long* P, int len_at,
                                            long long len_fixed, long long* tile_sums) {
    const long long tile = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / WARP_SIZE;
    const int lane = threadIdx.x & (WARP_SIZE - 1);
    const long long len = scan_len(P, len_at, len_fixed);
    if (tile * SCAN_TILE >= len) return;  // uniform per warp
    const long long base = tile * SCAN_TILE + (long long)lane * SCAN_ITEMS;
    long long s = 0;
    for (int k = 0; k < SCAN_ITEMS; ++k) {
        const long long i = base + k;
        if (i < len) {
            s += in[i];
            out[i] = s;
        }
    }
    const long long x = warp_inclusive_scan(s);
    const long long excl = x - s;
    for (int k = 0; k < SCAN_ITEMS; ++k) {
        const long long i = base + k;
        if (i < len) out[i] += excl;
    }
    if (lane == WARP_SIZE - 1) tile_sums[tile] = x;
}

// Pass 2, one warp: tile_sums := exclusive offsets of the tiles; P[total_at] := the total (if
// total_at >= 0: how a count, e.g. the distinct ids, stays on the device).
extern "C" __global__ void cache_scan_totals(long long* tile_sums, long long* P, int len_at, long long len_fixed,
                                             int total_at) {
    const int lane = threadIdx.x & (WARP_SIZE - 1);
    if (blockIdx.x != 0 || threadIdx.x >= WARP_SIZE) return;
    const long long len = scan_len(P, len_at, len_fixed);
    const long long ntiles = (len + SCAN_TILE - 1) / SCAN_TILE;
    long long carry = 0;
    for (long long b = 0; b < ntiles; b += WARP_SIZE) {  // uniform per warp
        const long long i = b + lane;
        const long long v = i < ntiles ? tile_sums[i] : 0;
        const long long x = warp_inclusive_scan(v);
        if (i < ntiles) tile_sums[i] = carry + x - v;
        carry += __shfl_sync(FULL_MASK, x, WARP_SIZE - 1);
    }
    if (lane == 0 && total_at >= 0) P[total_at] = carry;
}

// Pass 3: out[i] += the offset of its tile.
extern "C" __global__ void cache_scan_add(long long* out, const long long* tile_sums, const long long* P, int len_at,
                                          long long len_fixed) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= scan_len(P, len_at, len_fixed)) return;
    out[i] += tile_sums[i / SCAN_TILE];
}

extern "C" __global__ void cache_zero(long long* a, long long n) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] = 0;
}

// The start of a step: the counts the step computes on the device (P[0, P_COMPUTED)) := 0.
extern "C" __global__ void cache_step_begin(long long* P) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < P_COMPUTED) P[i] = 0;
}

// ---- stable counting sort by a digit, ranked with warp ballots ---------------------------------
// A pass sorts (key, val) by the digit (key >> shift) & (2^bits - 1), stably: the table
// hist[digit * ntiles + tile] counts each digit in each tile of RANK_TILE elements (digit-major,
// so its inclusive scan gives every (digit, tile) its place), and one warp per tile places its
// elements RANK_ROUNDS rounds of 32 in order, each element after the earlier ones of its digit in
// the tile (their number: __popc of the lanes below it whose digit matches, found with `bits`
// ballots). The engine sorts the misses by set this way, 8 bits of the set a pass over the bits
// the number of sets has (not a 64-bit sort), and ranks the spills inside their queue.

// Lanes of the warp whose (valid) digit equals this lane's; 0 for an invalid lane.
__device__ __forceinline__ unsigned warp_peers(long long digit, int bits, bool valid) {
    unsigned peers = __ballot_sync(FULL_MASK, valid);
    for (int b = 0; b < bits; ++b) {
        const bool bit = (digit >> b) & 1;
        const unsigned m = __ballot_sync(FULL_MASK, bit);
        peers &= bit ? m : ~m;
    }
    return valid ? peers : 0u;
}

__device__ __forceinline__ unsigned lanes_below() {
    return (1u << (threadIdx.x & (WARP_SIZE - 1))) - 1u;
}

// hist[digit * ntiles + i / RANK_TILE] += 1 for every i < len with key[i] >= 0 (hist zeroed).
extern "C" __global__ void cache_digit_count(const long long* key, const long long* P, int len_at, long long len_fixed,
                                             int shift, int bits, long long ntiles, long long* hist) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= scan_len(P, len_at, len_fixed)) return;
    const long long k = key[i];
    if (k < 0) return;
    const long long digit = (k >> shift) & ((1LL << bits) - 1);
    atomicAdd((unsigned long long*)&hist[digit * ntiles + i / RANK_TILE], 1ull);
}

// scan: the inclusive scan of hist. Writes (key, val) of every i < len at its sorted place; hist
// serves as this tile's cursors (each warp touches only its own tile's column).
extern "C" __global__ void cache_digit_scatter(const long long* key, const long long* val, long long* key_out,
                                               long long* val_out, const long long* P, int len_at,
                                               long long len_fixed, int shift, int bits, long long ntiles,
                                               long long* hist, const long long* scan) {
    const long long tile = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / WARP_SIZE;
    const int lane = threadIdx.x & (WARP_SIZE - 1);
    const long long len = scan_len(P, len_at, len_fixed);
    if (tile >= ntiles || tile * RANK_TILE >= len) return;  // uniform per warp
    for (long long dg = lane; dg < (1LL << bits); dg += WARP_SIZE) {
        const long long c = dg * ntiles + tile;
        hist[c] = scan[c] - hist[c];  // exclusive start of (digit, tile)
    }
    __syncwarp();
    for (int r = 0; r < RANK_ROUNDS; ++r) {
        const long long i = tile * RANK_TILE + (long long)r * WARP_SIZE + lane;
        const bool valid = i < len;
        const long long digit = valid ? (key[i] >> shift) & ((1LL << bits) - 1) : 0;
        const unsigned peers = warp_peers(digit, bits, valid);
        const long long c = digit * ntiles + tile;
        if (valid) {
            const long long pos = hist[c] + __popc(peers & lanes_below());
            key_out[pos] = key[i];
            val_out[pos] = val[i];
        }
        __syncwarp();
        if (valid && (peers & lanes_below()) == 0u) hist[c] += __popc(peers);  // the digit's lowest lane
        __syncwarp();
    }
}
