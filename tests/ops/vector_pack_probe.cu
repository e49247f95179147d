#include "tests/ops/vector_pack_probe.h"

#include <cuda_runtime.h>

#include "core/errors.h"
#include "ops/cuda/cuda_checks.h"
#include "ops/cuda/vector_pack.cuh"

namespace sublet::ops::testing {
namespace {

template <typename T>
__global__ void pack_kernel(const float* values, std::int64_t packs, std::uint16_t* out) {
  const std::int64_t p = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (p >= packs) return;
  float v[8];
  for (int j = 0; j < 8; ++j) v[j] = values[p * 8 + j];
  const cuda::Pack<T, 8> pack = cuda::pack_from_floats<T, 8>(v);
  for (int j = 0; j < 8; ++j) out[p * 8 + j] = *reinterpret_cast<const std::uint16_t*>(&pack.v[j]);
}

template <typename T>
__global__ void positive_kernel(std::uint8_t* out) {
  const unsigned bits = blockIdx.x * blockDim.x + threadIdx.x;
  if (bits >= 65536u) return;
  const auto pattern = static_cast<unsigned short>(bits);
  out[bits] = cuda::is_positive(*reinterpret_cast<const T*>(&pattern)) ? 1 : 0;
}

template <typename F>
void by_dtype(DType dtype, F&& f) {
  if (dtype == DType::BFloat16) return f(__nv_bfloat16{});
  if (dtype == DType::Float16) return f(__half{});
  throw DTypeError(std::string("vector_pack_probe: expected bfloat16 or float16, got ") + dtype_name(dtype));
}

}  // namespace

std::vector<std::uint16_t> pack_from_floats_bits(DType dtype, const std::vector<float>& values) {
  const std::int64_t packs = static_cast<std::int64_t>((values.size() + 7) / 8);
  std::vector<float> padded(values);
  padded.resize(static_cast<std::size_t>(packs * 8), 0.0f);
  float* d_values = nullptr;
  std::uint16_t* d_out = nullptr;
  SUBLET_CUDA_CHECK(cudaMalloc(&d_values, padded.size() * sizeof(float)));
  SUBLET_CUDA_CHECK(cudaMalloc(&d_out, padded.size() * sizeof(std::uint16_t)));
  SUBLET_CUDA_CHECK(cudaMemcpy(d_values, padded.data(), padded.size() * sizeof(float), cudaMemcpyHostToDevice));
  by_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    pack_kernel<T><<<static_cast<unsigned>((packs + 255) / 256), 256>>>(d_values, packs, d_out);
    SUBLET_CUDA_CHECK(cudaGetLastError());
  });
  std::vector<std::uint16_t> out(padded.size());
  SUBLET_CUDA_CHECK(cudaMemcpy(out.data(), d_out, out.size() * sizeof(std::uint16_t), cudaMemcpyDeviceToHost));
  SUBLET_CUDA_CHECK(cudaFree(d_values));
  SUBLET_CUDA_CHECK(cudaFree(d_out));
  out.resize(values.size());
  return out;
}

std::vector<std::uint8_t> is_positive_flags(DType dtype) {
  std::uint8_t* d_out = nullptr;
  SUBLET_CUDA_CHECK(cudaMalloc(&d_out, 65536));
  by_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    positive_kernel<T><<<256, 256>>>(d_out);
    SUBLET_CUDA_CHECK(cudaGetLastError());
  });
  std::vector<std::uint8_t> out(65536);
  SUBLET_CUDA_CHECK(cudaMemcpy(out.data(), d_out, out.size(), cudaMemcpyDeviceToHost));
  SUBLET_CUDA_CHECK(cudaFree(d_out));
  return out;
}

}  // namespace sublet::ops::testing
