// Row copies of the GPU engines: dst row dst_idx[k] := src row src_idx[k] (src row k when src_idx
// is null), for k < n. Prepended to the cache module (cache_copy_rows_*) and to reorder.cu
// (reorder_rows_*); lsm_gnn/utils/rowcopy.py picks the kernel and the launch shape, one rule for
// both engines:
// * the unit T is the widest of 16 (uint4), 8, 4, 1 bytes that divides the row size and both base
//   addresses (then every row of both arrays is aligned to it); a 16-byte unit is one 128-bit load
//   and store per thread, the widest a thread can issue;
// * a group of 2^shift threads (the power of two >= the row's units, at most one warp) copies one
//   row, so a block of blockDim threads copies blockDim >> shift rows (4096-byte rows: 256 uint4,
//   one warp per row, 8 rows per 256-thread block; 64-byte rows: 4 threads per row, 64 rows per
//   block), and consecutive threads touch consecutive units (coalesced).
// The previous kernels (one block per row, 4-byte words) left most of a block idle on short rows
// and issued 4x the memory instructions on long ones.
template <typename T>
__device__ __forceinline__ void copy_rows_grouped(const T* src, const long long* src_idx, T* dst,
                                                  const long long* dst_idx, long long n, long long row_units,
                                                  int shift) {
    const long long k = (long long)blockIdx.x * (blockDim.x >> shift) + (threadIdx.x >> shift);
    if (k >= n) return;  // the last block's surplus groups (n not a multiple of the rows per block)
    const int group = 1 << shift;
    const T* a = src + (src_idx ? src_idx[k] : k) * row_units;
    T* b = dst + dst_idx[k] * row_units;
#pragma unroll 4
    for (long long x = threadIdx.x & (group - 1); x < row_units; x += group) b[x] = a[x];
}
