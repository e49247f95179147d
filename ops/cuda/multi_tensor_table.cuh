#pragma once
// The chunk table the multi-tensor kernels share (optim_update.cu, multi_tensor_norm.cu): a list
// of tensors cut into fixed-size chunks, one block per chunk. The host uploads the entries in
// batches through kernel parameters (write_table_kernel); each block finds its entry, the last
// one whose chunk_begin is at or before its block index, by a binary search (entry_of_block).
// Entry needs an std::int32_t chunk_begin; Batch holds entries[], count and offset.
#include <cstdint>

namespace sublet::ops::cuda::multi_tensor {

template <typename Batch, typename Entry>
__global__ void write_table_kernel(Batch batch, Entry* table) {
  for (int i = threadIdx.x; i < batch.count; i += blockDim.x) table[batch.offset + i] = batch.entries[i];
}

template <typename Entry>
__device__ const Entry& entry_of_block(const Entry* table, int count) {
  __shared__ int found;
  if (threadIdx.x == 0) {
    int lo = 0, hi = count - 1;
    const auto chunk = static_cast<std::int32_t>(blockIdx.x);
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (table[mid].chunk_begin <= chunk) lo = mid; else hi = mid - 1;
    }
    found = lo;
  }
  __syncthreads();
  return table[found];
}

}  // namespace sublet::ops::cuda::multi_tensor
