// Reorder for the shared cache (GPU engine of lsm_gnn/multidevice/owners.py:reorder).
// Rows arrive grouped by owner; row k goes back to the requester's position positions[k].
// One block per row; threads copy 32-bit words (the host checks row_bytes % 4 == 0 and falls
// back to reorder_rows_bytes otherwise).
extern "C" __global__ void reorder_rows_words(const unsigned int* rows, const long long* positions,
                                              unsigned int* out, long long n, long long row_words) {
    long long k = blockIdx.x;
    if (k >= n) return;
    const unsigned int* src = rows + k * row_words;
    unsigned int* dst = out + positions[k] * row_words;
    for (long long j = threadIdx.x; j < row_words; j += blockDim.x) dst[j] = src[j];
}

extern "C" __global__ void reorder_rows_bytes(const unsigned char* rows, const long long* positions,
                                              unsigned char* out, long long n, long long row_bytes) {
    long long k = blockIdx.x;
    if (k >= n) return;
    const unsigned char* src = rows + k * row_bytes;
    unsigned char* dst = out + positions[k] * row_bytes;
    for (long long j = threadIdx.x; j < row_bytes; j += blockDim.x) dst[j] = src[j];
}
