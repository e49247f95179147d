// The global norm and clip scale of a tensor list on the GPU (ops/cuda/multi_tensor_norm.cu)
// against the CPU kernels: every norm type over mixed dtypes, sizes that are not multiples of the
// 16-byte vector, tensors at addresses that are not 16-byte aligned, empty ones, more tensors than
// one table upload takes, and a tensor of more than 2^24 elements. float32 norms: the GPU sums
// float32 chunks and adds them in float64, the CPU sums in float64: rtol 1e-6; float64: 1e-13.
// Repeated runs give the same bits. The scale, given the same norm, matches the CPU exactly (a NaN
// matches any NaN: the GPU writes a canonical NaN where the CPU keeps an operand's payload).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "cuda_test_support.h"
#include "ops/multi_tensor_norm.h"
#include "tests/gpu_skip.h"
#include "tests/ops/multi_tensor_norm_support.h"

namespace sublet::ops::testing {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Device copies of host arrays; `misaligned` places every second one an element past a 16-byte
// boundary, so that its loads take the scalar path.
class DeviceList {
 public:
  DeviceList(const std::vector<HostArray>& arrays, bool misaligned) {
    for (std::size_t t = 0; t < arrays.size(); ++t) {
      const HostArray& a = arrays[t];
      const std::size_t offset = misaligned && t % 2 == 1 ? element_size(a.dtype) : 0;
      std::vector<unsigned char> bytes(offset + a.bytes.size() + 16, 0);
      std::copy(a.bytes.begin(), a.bytes.end(), bytes.begin() + static_cast<std::ptrdiff_t>(offset));
      buffers_.push_back(std::make_unique<DeviceBuffer<unsigned char>>(bytes));
      offsets_.push_back(offset);
      tensors_.push_back({buffers_.back()->get() + offset, a.numel, a.dtype});
    }
  }
  const std::vector<NormTensor>& tensors() const { return tensors_; }
  HostArray download(std::size_t t, const HostArray& like) const {
    const std::vector<unsigned char> bytes = buffers_[t]->download();
    HostArray out = like;
    std::copy_n(bytes.begin() + static_cast<std::ptrdiff_t>(offsets_[t]), like.bytes.size(), out.bytes.begin());
    return out;
  }

 private:
  std::vector<std::unique_ptr<DeviceBuffer<unsigned char>>> buffers_;
  std::vector<std::size_t> offsets_;
  std::vector<NormTensor> tensors_;
};

std::vector<HostArray> mixed_list(std::uint64_t seed, std::size_t count = 9) {
  const std::vector<std::int64_t> sizes = {1, 8192, 7, 8193, 0, 16385, 3, 100003, 9};
  const std::vector<DType> dtypes = {DType::Float32, DType::BFloat16, DType::Float16};
  std::vector<HostArray> arrays;
  for (std::size_t i = 0; i < count; ++i) {
    arrays.push_back(random_array(dtypes[i % 3], sizes[i % sizes.size()], seed + i, 0.5 + static_cast<double>(i % 5)));
  }
  return arrays;
}

template <typename N>
N gpu_norm(const DeviceList& list, double norm_type) {
  DeviceBuffer<N> norm(1);
  multi_tensor_norm(gpu_context(), DTypeOf<N>::value, list.tensors(), norm_type, norm.get());
  return norm.download()[0];
}

template <typename N>
N cpu_norm(std::vector<HostArray>& arrays, double norm_type) {
  N norm = -1;
  multi_tensor_norm(Context::for_device(Device::cpu()), DTypeOf<N>::value, norm_tensors(arrays), norm_type, &norm);
  return norm;
}

void expect_norms_match(std::vector<HostArray> arrays, const std::string& what) {
  for (bool misaligned : {false, true}) {
    const DeviceList list(arrays, misaligned);
    for (double norm_type : {2.0, 1.0, 3.0, kInf}) {
      SCOPED_TRACE(what + (misaligned ? ", misaligned" : ", aligned") + ", norm_type " + std::to_string(norm_type));
      const float expected = cpu_norm<float>(arrays, norm_type);
      const float first = gpu_norm<float>(list, norm_type);
      EXPECT_NEAR(first, expected, 1e-6 * expected);
      EXPECT_EQ(first, gpu_norm<float>(list, norm_type)) << "a second run gave other bits";
    }
  }
}

TEST(CudaMultiTensorNorm, MixedListsMatchTheCpuAndRepeatBitForBit) {
  SUBLET_SKIP_WITHOUT_GPU("the multi-tensor norm of mixed float32/bfloat16/float16 lists against the CPU");
  expect_norms_match(mixed_list(10), "mixed list");
  expect_norms_match(mixed_list(20, 1), "one tensor");
  expect_norms_match(mixed_list(30, 400), "400 tensors (three table uploads)");
}

TEST(CudaMultiTensorNorm, MoreThanTwoToThe24ElementsAndFloat64) {
  SUBLET_SKIP_WITHOUT_GPU("the multi-tensor norm of a tensor past 2^24 elements and of float64 tensors");
  std::vector<HostArray> big = {random_array(DType::Float32, (std::int64_t{1} << 24) + 5, 1),
                                random_array(DType::BFloat16, 77, 2)};
  const DeviceList big_list(big, false);
  const double expected = reference_norm(big, 2.0);
  EXPECT_NEAR(gpu_norm<float>(big_list, 2.0), expected, 1e-6 * expected);

  std::vector<HostArray> wide = {random_array(DType::Float64, 30001, 3), random_array(DType::Float32, 13, 4)};
  for (bool misaligned : {false, true}) {
    const DeviceList list(wide, misaligned);
    for (double norm_type : {2.0, 1.0, 3.0, kInf}) {
      const double cpu = cpu_norm<double>(wide, norm_type);
      EXPECT_NEAR(gpu_norm<double>(list, norm_type), cpu, 1e-13 * cpu) << "norm_type " << norm_type;
    }
  }
}

TEST(CudaMultiTensorNorm, EmptyListsWriteZero) {
  SUBLET_SKIP_WITHOUT_GPU("the multi-tensor norm of empty lists");
  const DeviceList none({}, false);
  DeviceBuffer<float> norm(std::vector<float>{123.0f});
  multi_tensor_norm(gpu_context(), DType::Float32, none.tensors(), 2.0, norm.get());
  EXPECT_EQ(norm.download()[0], 0.0f);
  const DeviceList empties({random_array(DType::Float32, 0, 1), random_array(DType::Float16, 0, 2)}, false);
  norm.upload({123.0f});
  multi_tensor_norm(gpu_context(), DType::Float32, empties.tensors(), kInf, norm.get());
  EXPECT_EQ(norm.download()[0], 0.0f);
}

// The same norm on both devices, then the scale: every element as the CPU kernel writes it.
void expect_scale_matches(std::vector<HostArray> arrays, float norm, double max_norm, const std::string& what) {
  for (bool misaligned : {false, true}) {
    SCOPED_TRACE(what + (misaligned ? ", misaligned" : ", aligned"));
    std::vector<HostArray> cpu = arrays;
    multi_tensor_clip_scale(Context::for_device(Device::cpu()), DType::Float32, norm_tensors(cpu), &norm, max_norm);
    const DeviceList list(arrays, misaligned);
    DeviceBuffer<float> device_norm(std::vector<float>{norm});
    multi_tensor_clip_scale(gpu_context(), DType::Float32, list.tensors(), device_norm.get(), max_norm);
    for (std::size_t t = 0; t < arrays.size(); ++t) {
      const HostArray gpu = list.download(t, arrays[t]);
      std::int64_t bad = 0;
      for (std::int64_t i = 0; i < gpu.numel; ++i) bad += same_value(gpu.at(i), cpu[t].at(i)) ? 0 : 1;
      EXPECT_EQ(bad, 0) << "tensor " << t << " (" << dtype_name(arrays[t].dtype) << ") differs in " << bad << " of "
                        << gpu.numel << " elements";
    }
  }
}

TEST(CudaMultiTensorClipScale, MatchesTheCpuExactly) {
  SUBLET_SKIP_WITHOUT_GPU("the multi-tensor clip scale against the CPU");
  std::vector<HostArray> arrays = mixed_list(40);
  const float norm = cpu_norm<float>(arrays, 2.0);
  expect_scale_matches(arrays, norm, 0.37 * norm, "clipped");
  expect_scale_matches(arrays, norm, 3.0 * norm, "below max_norm");
  expect_scale_matches(arrays, std::numeric_limits<float>::quiet_NaN(), 1.0, "NaN norm");
  expect_scale_matches(arrays, std::numeric_limits<float>::infinity(), 1.0, "infinite norm");
  expect_scale_matches(mixed_list(50, 400), norm, 0.5, "400 tensors");
}

}  // namespace
}  // namespace sublet::ops::testing
