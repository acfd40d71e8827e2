// Reorder for the shared cache (GPU engine of lsm_gnn/ownership.py:reorder).
// Rows arrive grouped by owner; row k goes back to the requester's position positions[k]:
// out[positions[k]] = rows[k], in units of 16, 8, 4 or 1 bytes with several rows per block
// (row_copy.cuh, prepended; lsm_gnn/utils/rowcopy.py chooses the unit and the shape).
extern "C" __global__ void reorder_rows_16(const uint4* rows, const long long* positions, uint4* out,
                                           long long n, long long row_units, int shift) {
    copy_rows_grouped(rows, (const long long*)0, out, positions, n, row_units, shift);
}

extern "C" __global__ void reorder_rows_8(const unsigned long long* rows, const long long* positions,
                                          unsigned long long* out, long long n, long long row_units, int shift) {
    copy_rows_grouped(rows, (const long long*)0, out, positions, n, row_units, shift);
}

extern "C" __global__ void reorder_rows_4(const unsigned int* rows, const long long* positions, unsigned int* out,
                                          long long n, long long row_units, int shift) {
    copy_rows_grouped(rows, (const long long*)0, out, positions, n, row_units, shift);
}

extern "C" __global__ void reorder_rows_1(const unsigned char* rows, const long long* positions,
                                          unsigned char* out, long long n, long long row_units, int shift) {
    copy_rows_grouped(rows, (const long long*)0, out, positions, n, row_units, shift);
}
