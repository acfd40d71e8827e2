// Owner split for the shared cache (GPU engine of lsm_gnn/ownership.py: split_by_owner).
// Node v belongs to owner v % G. The split is a stable counting sort: each thread owns a
// contiguous chunk of the input, counts its ids per owner (pass 1), the host side turns the
// owner-major table counts[o * n_chunks + c] into exclusive offsets (cupy.cumsum), and each
// thread then scatters its chunk in input order (pass 2). Inside a bucket the order is therefore
// the input order, exactly as in the CPU engine.
#define MAX_OWNERS 64

extern "C" __global__ void owner_chunk_count(const long long* ids, long long n, int num_owners,
                                             long long chunk, long long n_chunks,
                                             long long* counts) {
    long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= n_chunks) return;
    long long local[MAX_OWNERS];
    for (int o = 0; o < num_owners; ++o) local[o] = 0;
    long long begin = c * chunk;
    long long end = begin + chunk < n ? begin + chunk : n;
    for (long long i = begin; i < end; ++i) local[ids[i] % num_owners] += 1;
    for (int o = 0; o < num_owners; ++o) counts[(long long)o * n_chunks + c] = local[o];
}

extern "C" __global__ void owner_chunk_scatter(const long long* ids, long long n, int num_owners,
                                               long long chunk, long long n_chunks,
                                               const long long* starts,  // exclusive offsets, owner-major
                                               long long* send_ids, long long* positions) {
    long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= n_chunks) return;
    long long cursor[MAX_OWNERS];
    for (int o = 0; o < num_owners; ++o) cursor[o] = starts[(long long)o * n_chunks + c];
    long long begin = c * chunk;
    long long end = begin + chunk < n ? begin + chunk : n;
    for (long long i = begin; i < end; ++i) {
        int o = (int)(ids[i] % num_owners);
        long long k = cursor[o]++;
        send_ids[k] = ids[i];
        positions[k] = i;
    }
}
