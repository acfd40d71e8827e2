// The serve step of the device data plane (lsm_gnn/cache/serve.py builds the descriptors,
// lsm_gnn/cache/device_pool.py launches these kernels; docs/cache-gpu.md "The fetch path").
//
// cache_serve_rows_<unit>: out[k] := the row request k's descriptor src[k] names, for k < n, where
// the descriptor is (kind << SERVE_KIND_SHIFT) | index and the kind is the request's status
// (STATUS_HIT: cache line `index`; STATUS_VICTIM_HIT: landing-buffer row `index`; STATUS_STORAGE:
// staged row `index`, the staging buffer being mapped pinned host memory read over PCIe in place:
// no upload of the staging, no device copy of it). Only the requests whose kind is in the bit set
// `kinds` are written, so one kernel serves the fetch order's steps (hits before the storage read
// has finished, victim hits, then the storage rows) or all of them at once (kinds = 7).
//
// cache_put_rows_<unit>: dst row dst_idx[k] := src row src_idx[k] for k < n, except where
// dst_idx[k] < 0 (the plan's fixed-size masks: -1 where nothing moves). The fills (batch tensor ->
// the cache line of each slot's last fill) and the spills (cache line -> a victim queue row in
// mapped pinned host memory: warp writes over PCIe, no copy through a scratch tensor).
//
// Every base address is passed as an integer (a device address, or the device address of mapped
// host memory), so one kernel reads device and host rows alike. The launch shape is the row
// copies' (cuda/row_copy.cuh, lsm_gnn/utils/rowcopy.py): the widest unit of 16, 8, 4, 1 bytes
// dividing the row size and every base address, a group of 2^shift threads (up to a warp) per row,
// 256 threads per block; consecutive threads of a group move consecutive units (coalesced).
#define SERVE_KIND_SHIFT 56
#define SERVE_INDEX_MASK ((1LL << SERVE_KIND_SHIFT) - 1)

template <typename T>
__device__ __forceinline__ void serve_rows(unsigned long long lines, unsigned long long landing,
                                           unsigned long long staged, unsigned long long src_addr,
                                           unsigned long long out_addr, long long n, long long row_units,
                                           int shift, int kinds) {
    const long long k = (long long)blockIdx.x * (blockDim.x >> shift) + (threadIdx.x >> shift);
    if (k >= n) return;
    const long long s = ((const long long*)src_addr)[k];
    const int kind = (int)(s >> SERVE_KIND_SHIFT);
    if (kind < 0 || kind > STATUS_STORAGE || !((kinds >> kind) & 1)) return;
    const unsigned long long base = kind == STATUS_HIT ? lines : kind == STATUS_VICTIM_HIT ? landing : staged;
    const T* a = (const T*)base + (s & SERVE_INDEX_MASK) * row_units;
    T* b = (T*)out_addr + k * row_units;
    const int group = 1 << shift;
#pragma unroll 4
    for (long long x = threadIdx.x & (group - 1); x < row_units; x += group) b[x] = a[x];
}

template <typename T>
__device__ __forceinline__ void put_rows(unsigned long long src_addr, unsigned long long src_idx,
                                         unsigned long long dst_addr, unsigned long long dst_idx, long long n,
                                         long long row_units, int shift) {
    const long long k = (long long)blockIdx.x * (blockDim.x >> shift) + (threadIdx.x >> shift);
    if (k >= n) return;
    const long long d = ((const long long*)dst_idx)[k];
    if (d < 0) return;   // masked: nothing moves for this entry
    const T* a = (const T*)src_addr + ((const long long*)src_idx)[k] * row_units;
    T* b = (T*)dst_addr + d * row_units;
    const int group = 1 << shift;
#pragma unroll 4
    for (long long x = threadIdx.x & (group - 1); x < row_units; x += group) b[x] = a[x];
}

extern "C" __global__ void cache_serve_rows_16(unsigned long long lines, unsigned long long landing,
                                               unsigned long long staged, unsigned long long src,
                                               unsigned long long out, long long n, long long row_units,
                                               int shift, int kinds) {
    serve_rows<uint4>(lines, landing, staged, src, out, n, row_units, shift, kinds);
}

extern "C" __global__ void cache_serve_rows_8(unsigned long long lines, unsigned long long landing,
                                              unsigned long long staged, unsigned long long src,
                                              unsigned long long out, long long n, long long row_units,
                                              int shift, int kinds) {
    serve_rows<unsigned long long>(lines, landing, staged, src, out, n, row_units, shift, kinds);
}

extern "C" __global__ void cache_serve_rows_4(unsigned long long lines, unsigned long long landing,
                                              unsigned long long staged, unsigned long long src,
                                              unsigned long long out, long long n, long long row_units,
                                              int shift, int kinds) {
    serve_rows<unsigned int>(lines, landing, staged, src, out, n, row_units, shift, kinds);
}

extern "C" __global__ void cache_serve_rows_1(unsigned long long lines, unsigned long long landing,
                                              unsigned long long staged, unsigned long long src,
                                              unsigned long long out, long long n, long long row_units,
                                              int shift, int kinds) {
    serve_rows<unsigned char>(lines, landing, staged, src, out, n, row_units, shift, kinds);
}

extern "C" __global__ void cache_put_rows_16(unsigned long long src, unsigned long long src_idx,
                                             unsigned long long dst, unsigned long long dst_idx, long long n,
                                             long long row_units, int shift) {
    put_rows<uint4>(src, src_idx, dst, dst_idx, n, row_units, shift);
}

extern "C" __global__ void cache_put_rows_8(unsigned long long src, unsigned long long src_idx,
                                            unsigned long long dst, unsigned long long dst_idx, long long n,
                                            long long row_units, int shift) {
    put_rows<unsigned long long>(src, src_idx, dst, dst_idx, n, row_units, shift);
}

extern "C" __global__ void cache_put_rows_4(unsigned long long src, unsigned long long src_idx,
                                            unsigned long long dst, unsigned long long dst_idx, long long n,
                                            long long row_units, int shift) {
    put_rows<unsigned int>(src, src_idx, dst, dst_idx, n, row_units, shift);
}

extern "C" __global__ void cache_put_rows_1(unsigned long long src, unsigned long long src_idx,
                                            unsigned long long dst, unsigned long long dst_idx, long long n,
                                            long long row_units, int shift) {
    put_rows<unsigned char>(src, src_idx, dst, dst_idx, n, row_units, shift);
}
