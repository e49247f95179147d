#pragma once
// A fixed-order tree reduction over one block: the result depends only on the launch
// geometry, never on timing, so repeated runs give identical bits.
namespace sublet::ops::cuda {

// All threads of the block must call it; `scratch` holds blockDim.x values (blockDim.x a power
// of two). Every thread gets the combined value, so all of them can branch on it alike.
template <typename V, typename Combine>
__device__ V block_combine(V value, V* scratch, Combine combine) {
  const unsigned tid = threadIdx.x;
  scratch[tid] = value;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (tid < half) scratch[tid] = combine(scratch[tid], scratch[tid + half]);
    __syncthreads();
  }
  const V result = scratch[0];
  __syncthreads();  // scratch may be reused by the caller right after
  return result;
}

}  // namespace sublet::ops::cuda
