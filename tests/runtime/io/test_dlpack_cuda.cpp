// DLPack exchange on CUDA devices and pinned host memory (runtime/io/dlpack.h): round trips for
// every dtype, the deleter exactly once, exported blocks staying allocated, strides. Skips
// without a GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/errors.h"
#include "memory/pinned_host.h"
#include "memory/registry.h"
#include "runtime/io/dlpack.h"
#include "runtime/tensor.h"
#include "tests/gpu_skip.h"
#include "tests/runtime/io/dlpack_test_producer.h"

namespace sublet {
namespace {

using testing::DLPackProducer;
using testing::kDLFloat32;

constexpr DType kDTypes[] = {DType::Float32, DType::Float64, DType::Int64, DType::UInt8, DType::BFloat16, DType::Float16};

std::vector<double> random_values(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> dist(1, 200);  // exact in every dtype above, never zero
  std::vector<double> v(n);
  for (double& x : v) x = dist(gen);
  return v;
}

// Host values in `dtype`, moved to the GPU byte for byte (CUDA has copy kernels for float32,
// float64 and int64 only; a device transfer of a contiguous tensor needs none).
Tensor cuda_tensor_of(const std::vector<double>& values, const Shape& sizes, DType dtype) {
  return Tensor::from_vector(values, sizes).to(dtype).to(Device::cuda(0));
}

std::vector<double> values_of(const Tensor& t) { return t.to(Device::cpu()).to(DType::Float64).to_vector<double>(); }

TEST(DLPackCuda, RoundTripsEveryDtypeZeroCopy) {
  SUBLET_SKIP_WITHOUT_GPU("DLPack export and import of CUDA tensors of every dtype");
  const Device cuda = Device::cuda(0);
  for (DType dtype : kDTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const std::vector<double> values = random_values(12, 5);
    Tensor holder = cuda_tensor_of(values, {3, 4}, dtype);  // the "other framework's" memory
    dlpack::DLManagedTensorVersioned* exported = to_dlpack(holder);
    EXPECT_EQ(exported->dl_tensor.device.device_type, dlpack::kDLCUDA);
    EXPECT_EQ(exported->dl_tensor.device.device_id, 0);
    EXPECT_EQ(exported->dl_tensor.data, holder.data_ptr());
    const dlpack::DLDataType dl_dtype = exported->dl_tensor.dtype;
    exported->deleter(exported);

    const std::size_t allocated = memory_allocated(cuda);
    DLPackProducer producer;
    producer.shape = {3, 4};
    {
      Tensor t = from_dlpack(producer.make_versioned(holder.data_ptr(), {dlpack::kDLCUDA, 0}, dl_dtype));
      EXPECT_EQ(t.device(), cuda);
      EXPECT_EQ(t.dtype(), dtype);
      EXPECT_EQ(t.data_ptr(), holder.data_ptr());
      EXPECT_EQ(memory_allocated(cuda), allocated) << "imported memory is not the allocator's";
      EXPECT_EQ(values_of(t), values);
    }
    EXPECT_EQ(producer.deleter_calls, 1);
  }
}

TEST(DLPackCuda, ExportKeepsTheBlockAllocatedUntilTheConsumerDeletes) {
  SUBLET_SKIP_WITHOUT_GPU("an exported CUDA tensor's block stays allocated until the consumer's deleter");
  const Device cuda = Device::cuda(0);
  const std::size_t before = memory_allocated(cuda);
  Tensor t = Tensor::empty({1 << 20}, TensorOptions().device(cuda));
  const std::size_t with_tensor = memory_allocated(cuda);
  ASSERT_GE(with_tensor, before + (std::size_t{1} << 22));
  dlpack::DLManagedTensorVersioned* m = to_dlpack(t);
  t = Tensor();
  EXPECT_EQ(memory_allocated(cuda), with_tensor);
  m->deleter(m);
  EXPECT_EQ(memory_allocated(cuda), before);
}

TEST(DLPackCuda, StridedProducerBecomesAStridedView) {
  SUBLET_SKIP_WITHOUT_GPU("a column-major CUDA tensor imported as a strided view");
  const std::vector<double> values = random_values(12, 6);
  Tensor holder = cuda_tensor_of(values, {12}, DType::Float32);
  DLPackProducer producer;
  producer.shape = {3, 4};
  producer.strides = {1, 3};
  Tensor t = from_dlpack(producer.make_versioned(holder.data_ptr(), {dlpack::kDLCUDA, 0}, kDLFloat32));
  EXPECT_FALSE(t.is_contiguous());
  std::vector<double> expected;
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 4; ++c) expected.push_back(values[r + 3 * c]);
  EXPECT_EQ(values_of(t.contiguous()), expected);
}

TEST(DLPackCuda, PinnedHostMemoryIsACpuTensorThatGoesOutAsCudaHost) {
  SUBLET_SKIP_WITHOUT_GPU("kDLCUDAHost (pinned host memory) import and re-export");
  memory::CachingAllocator& pinned = memory::pinned_allocator();
  memory::Block* block = pinned.allocate(6 * sizeof(float), memory::pinned_host_stream());
  const std::vector<float> values = {2, 7, 1, 8, 2, 8};
  std::memcpy(block->ptr, values.data(), sizeof(float) * values.size());
  DLPackProducer producer;
  producer.shape = {2, 3};
  {
    Tensor t = from_dlpack(producer.make_versioned(block->ptr, {dlpack::kDLCUDAHost, 0}, kDLFloat32));
    EXPECT_EQ(t.device(), Device::cpu());
    EXPECT_TRUE(t.storage().pinned_host());
    EXPECT_EQ(t.to_vector<float>(), values);
    EXPECT_EQ(t.to(Device::cuda(0)).to(Device::cpu()).to_vector<float>(), values);
    dlpack::DLManagedTensorVersioned* m = to_dlpack(t);
    EXPECT_EQ(m->dl_tensor.device.device_type, dlpack::kDLCUDAHost);
    EXPECT_EQ(m->dl_tensor.data, block->ptr);
    m->deleter(m);
  }
  EXPECT_EQ(producer.deleter_calls, 1);
  pinned.free(block);
}

TEST(DLPackCuda, DeviceBeyondTheLastIsRefused) {
  SUBLET_SKIP_WITHOUT_GPU("a kDLCUDA device index sublet does not see");
  std::vector<float> buffer(4, 1.0f);
  DLPackProducer producer;
  producer.shape = {4};
  const int count = memory::cuda_device_count();
  try {
    from_dlpack(producer.make_versioned(buffer.data(), {dlpack::kDLCUDA, count}, kDLFloat32));
    ADD_FAILURE() << "expected DeviceError";
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("sublet sees " + std::to_string(count) + " CUDA device(s)"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(producer.deleter_calls, 1);
}

}  // namespace
}  // namespace sublet
