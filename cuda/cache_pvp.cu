// PVP gather and row moves (docs/cache-semantics.md, "Victim buffer and PVP").
// Needs cache_common.cuh prepended.
//
// End of iteration t: the landing buffer forgets its ids (row_land := NONE_POS), queue
// q = (t + 1) % W is copied into it, each id's row_land := its first position there (an id can
// sit in a queue twice; the first copy is the one found), and the queue is emptied. Three
// launches in one stream, so each pass sees the previous one's writes; no host sync is needed
// (the counts stay on the device; grids cover `depth` threads).

extern "C" __global__ void cache_land_clear(const long long* land_ids, const long long* land_n,
                                            long long G, int* row_land) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= land_n[0]) return;
    row_land[land_ids[i] / G] = NONE_POS;
}

extern "C" __global__ void cache_land_gather(const long long* q_ids, const long long* q_count,
                                             long long q, long long depth, long long G,
                                             long long* land_ids, int* row_land) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= q_count[q]) return;
    long long v = q_ids[q * depth + i];
    land_ids[i] = v;
    atomicMin(&row_land[v / G], (int)i);
}

extern "C" __global__ void cache_land_finish(long long* q_count, long long q, long long* land_n) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        land_n[0] = q_count[q];
        q_count[q] = 0;
    }
}

// Row data moves for a fetcher (spill: cache -> victim queue, PVP: queue -> landing buffer,
// victim hit: landing buffer -> cache): dst[dst_idx[k]] = src[src_idx[k]], in units of 16, 8, 4 or
// 1 bytes (row_copy.cuh: the unit and the rows per block; gpu_engine.copy_rows chooses).
extern "C" __global__ void cache_copy_rows_16(const uint4* src, const long long* src_idx, uint4* dst,
                                              const long long* dst_idx, long long n, long long row_units,
                                              int shift) {
    copy_rows_grouped(src, src_idx, dst, dst_idx, n, row_units, shift);
}

extern "C" __global__ void cache_copy_rows_8(const unsigned long long* src, const long long* src_idx,
                                             unsigned long long* dst, const long long* dst_idx, long long n,
                                             long long row_units, int shift) {
    copy_rows_grouped(src, src_idx, dst, dst_idx, n, row_units, shift);
}

extern "C" __global__ void cache_copy_rows_4(const unsigned int* src, const long long* src_idx,
                                             unsigned int* dst, const long long* dst_idx, long long n,
                                             long long row_units, int shift) {
    copy_rows_grouped(src, src_idx, dst, dst_idx, n, row_units, shift);
}

extern "C" __global__ void cache_copy_rows_1(const unsigned char* src, const long long* src_idx,
                                             unsigned char* dst, const long long* dst_idx, long long n,
                                             long long row_units, int shift) {
    copy_rows_grouped(src, src_idx, dst, dst_idx, n, row_units, shift);
}
