// DLPack exchange on the CPU (runtime/io/dlpack.h): round trips for every dtype, the producer's
// deleter exactly once, exported blocks staying allocated, strides, read-only, and bad input.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/errors.h"
#include "core/half.h"
#include "memory/registry.h"
#include "runtime/io/dlpack.h"
#include "runtime/tensor.h"
#include "tests/throw_message.h"
#include "tests/runtime/io/dlpack_test_producer.h"

namespace sublet {
namespace {

using testing::DLPackProducer;
using testing::kDLCpu;
using testing::kDLFloat32;

constexpr DType kDTypes[] = {DType::Float32, DType::Float64, DType::Int64, DType::UInt8, DType::BFloat16, DType::Float16};

// Random whole numbers in [1, 200]: exact in every dtype above, never zero.
std::vector<double> random_values(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> dist(1, 200);
  std::vector<double> v(n);
  for (double& x : v) x = dist(gen);
  return v;
}

Tensor tensor_of(const std::vector<double>& values, const Shape& sizes, DType dtype) {
  return Tensor::from_vector(values, sizes).to(dtype);
}

std::vector<double> values_of(const Tensor& t) { return t.to(DType::Float64).to_vector<double>(); }

dlpack::DLDataType expected_dl_dtype(DType dtype) {
  switch (dtype) {
    case DType::Float32: return {dlpack::kDLFloat, 32, 1};
    case DType::Float64: return {dlpack::kDLFloat, 64, 1};
    case DType::Int64: return {dlpack::kDLInt, 64, 1};
    case DType::UInt8: return {dlpack::kDLUInt, 8, 1};
    case DType::BFloat16: return {dlpack::kDLBfloat, 16, 1};
    case DType::Float16: return {dlpack::kDLFloat, 16, 1};
  }
  return {};
}

using sublet::testing::message_of;

TEST(DLPack, ExportDescribesTheTensorForEveryDtype) {
  for (DType dtype : kDTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    Tensor t = tensor_of(random_values(6, 1), {2, 3}, dtype);
    dlpack::DLManagedTensorVersioned* m = to_dlpack(t);
    EXPECT_EQ(m->version.major, 1u);
    EXPECT_EQ(m->flags, 0u);
    const dlpack::DLTensor& dl = m->dl_tensor;
    EXPECT_EQ(dl.data, t.data_ptr());
    EXPECT_EQ(dl.byte_offset, 0u);
    EXPECT_EQ(dl.device.device_type, dlpack::kDLCPU);
    EXPECT_EQ(dl.ndim, 2);
    EXPECT_EQ(dl.dtype.code, expected_dl_dtype(dtype).code);
    EXPECT_EQ(dl.dtype.bits, expected_dl_dtype(dtype).bits);
    EXPECT_EQ(dl.dtype.lanes, 1);
    ASSERT_NE(dl.shape, nullptr);
    ASSERT_NE(dl.strides, nullptr);  // sublet always says (null would mean row-major)
    EXPECT_EQ(std::vector<std::int64_t>(dl.shape, dl.shape + 2), (std::vector<std::int64_t>{2, 3}));
    EXPECT_EQ(std::vector<std::int64_t>(dl.strides, dl.strides + 2), (std::vector<std::int64_t>{3, 1}));
    m->deleter(m);
  }
}

TEST(DLPack, ForeignTensorRoundTripsZeroCopyForEveryDtype) {
  for (DType dtype : kDTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const std::vector<double> values = random_values(12, 2);
    const Tensor source = tensor_of(values, {3, 4}, dtype);  // the producer's bytes
    std::vector<unsigned char> buffer(source.nbytes());
    std::memcpy(buffer.data(), source.data_ptr(), buffer.size());
    DLPackProducer producer;
    producer.shape = {3, 4};
    {
      Tensor t = from_dlpack(producer.make_versioned(buffer.data(), kDLCpu, expected_dl_dtype(dtype)));
      EXPECT_EQ(t.dtype(), dtype);
      EXPECT_EQ(t.device(), Device::cpu());
      EXPECT_EQ(t.sizes(), (Shape{3, 4}));
      EXPECT_EQ(t.data_ptr(), buffer.data());
      EXPECT_EQ(values_of(t), values);
      // Out again (as another framework would get it) and back: the same bytes all along.
      dlpack::DLManagedTensorVersioned* again = to_dlpack(t);
      EXPECT_EQ(again->dl_tensor.data, buffer.data());
      Tensor back = from_dlpack(again);
      EXPECT_TRUE(back.storage().is_same(t.storage()));
      EXPECT_EQ(producer.deleter_calls, 0);
    }
    EXPECT_EQ(producer.deleter_calls, 1);
  }
}

TEST(DLPack, SubletTensorComesBackAsItself) {
  Tensor t = tensor_of(random_values(8, 3), {8}, DType::Float32);
  Tensor back = from_dlpack(to_dlpack(t));
  EXPECT_TRUE(back.storage().is_same(t.storage()));
  EXPECT_EQ(back.data_ptr(), t.data_ptr());
  Tensor legacy_back = from_dlpack(to_dlpack_legacy(t));
  EXPECT_TRUE(legacy_back.storage().is_same(t.storage()));
}

TEST(DLPack, LegacyStructRoundTrips) {
  std::vector<float> buffer = {3, 1, 4, 1, 5, 9};
  DLPackProducer producer;
  producer.shape = {2, 3};
  {
    Tensor t = from_dlpack(producer.make_legacy(buffer.data(), kDLCpu, kDLFloat32));
    EXPECT_EQ(t.to_vector<float>(), buffer);
    EXPECT_EQ(t.data_ptr(), buffer.data());
    t.mul_(2.0);  // the legacy struct has no read-only flag: writable
    EXPECT_EQ(buffer[5], 18.0f);
    dlpack::DLManagedTensor* out = to_dlpack_legacy(t);
    EXPECT_EQ(out->dl_tensor.data, buffer.data());
    out->deleter(out);
  }
  EXPECT_EQ(producer.deleter_calls, 1);
}

TEST(DLPack, CudaHostDeviceIsACpuTensorThatGoesOutAsCudaHost) {
  // from_dlpack takes the producer's word for kDLCUDAHost (it calls nothing of CUDA for it), so a
  // plain buffer checks the bookkeeping here; test_dlpack_cuda does it with pinned memory.
  std::vector<float> buffer = {1, 2, 3};
  DLPackProducer producer;
  producer.shape = {3};
  {
    Tensor t = from_dlpack(producer.make_versioned(buffer.data(), {dlpack::kDLCUDAHost, 0}, kDLFloat32));
    EXPECT_EQ(t.device(), Device::cpu());
    EXPECT_TRUE(t.storage().pinned_host());
    EXPECT_EQ(t.to_vector<float>(), buffer);
    dlpack::DLManagedTensorVersioned* m = to_dlpack(t.narrow(0, 1, 2));
    EXPECT_EQ(m->dl_tensor.device.device_type, dlpack::kDLCUDAHost);
    EXPECT_EQ(m->dl_tensor.data, buffer.data() + 1);
    m->deleter(m);
  }
  EXPECT_EQ(producer.deleter_calls, 1);
  dlpack::DLManagedTensorVersioned* own = to_dlpack(Tensor::empty({2}));
  EXPECT_EQ(own->dl_tensor.device.device_type, dlpack::kDLCPU) << "sublet's own CPU memory is not pinned";
  own->deleter(own);
}

TEST(DLPack, DeleterRunsOnceWhenTheLastViewDies) {
  std::vector<float> buffer(24, 1.5f);
  DLPackProducer producer;
  producer.shape = {4, 6};
  Tensor t = from_dlpack(producer.make_versioned(buffer.data(), kDLCpu, kDLFloat32));
  Tensor row = t.select(0, 2);
  Tensor transposed = t.t();
  Tensor copy_of_handle = t;
  dlpack::DLManagedTensorVersioned* exported = to_dlpack(t.narrow(1, 1, 3));  // a consumer holds a view
  t = Tensor();
  copy_of_handle = Tensor();
  row = Tensor();
  EXPECT_EQ(producer.deleter_calls, 0);
  transposed = Tensor();
  EXPECT_EQ(producer.deleter_calls, 0) << "the consumer of the re-export still holds the memory";
  exported->deleter(exported);
  EXPECT_EQ(producer.deleter_calls, 1);
}

TEST(DLPack, ExportKeepsTheBlockAllocatedUntilTheConsumerDeletes) {
  const Device cpu = Device::cpu();
  const std::size_t before = memory_allocated(cpu);
  constexpr std::int64_t kElements = 256 * 1024;  // 1 MiB of float32
  Tensor t = Tensor::empty({kElements});
  t.fill_(2.0);
  const std::size_t with_tensor = memory_allocated(cpu);
  ASSERT_GE(with_tensor, before + kElements * sizeof(float));
  dlpack::DLManagedTensorVersioned* m = to_dlpack(t);
  const void* data = t.data_ptr();
  t = Tensor();
  EXPECT_EQ(memory_allocated(cpu), with_tensor) << "sublet dropped its handle; the consumer still holds the block";
  EXPECT_EQ(static_cast<const float*>(m->dl_tensor.data)[kElements - 1], 2.0f);
  EXPECT_EQ(m->dl_tensor.data, data);
  m->deleter(m);
  EXPECT_EQ(memory_allocated(cpu), before);
}

TEST(DLPack, ImportedMemoryIsNotCountedByTheAllocator) {
  const Device cpu = Device::cpu();
  const auto stats_before = memory_stats(cpu);
  std::vector<float> buffer(256 * 1024, 0.25f);
  DLPackProducer producer;
  producer.shape = {256, 1024};
  {
    Tensor t = from_dlpack(producer.make_versioned(buffer.data(), kDLCpu, kDLFloat32));
    EXPECT_EQ(t.storage().block(), nullptr);
    EXPECT_EQ(t.storage().nbytes(), buffer.size() * sizeof(float));
    EXPECT_EQ(memory_stats(cpu), stats_before);
    EXPECT_EQ(t.storage().category(), memory::BlockCategory::Unknown);
    t.storage().set_category(memory::BlockCategory::Parameter);  // nothing to tag: no block
    EXPECT_EQ(t.storage().category(), memory::BlockCategory::Unknown);
  }
  EXPECT_EQ(memory_stats(cpu), stats_before);
}

TEST(DLPack, StridedProducerBecomesAStridedView) {
  // A 3x4 matrix stored column-major (strides {1, 3}), starting 2 elements into the buffer.
  std::vector<float> buffer(2 + 12);
  for (std::size_t i = 0; i < buffer.size(); ++i) buffer[i] = static_cast<float>(10 + i);
  DLPackProducer producer;
  producer.shape = {3, 4};
  producer.strides = {1, 3};
  Tensor t = from_dlpack(producer.make_versioned(buffer.data(), kDLCpu, kDLFloat32, 0, 2 * sizeof(float)));
  EXPECT_EQ(t.strides(), (Shape{1, 3}));
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(t.data_ptr(), buffer.data() + 2);
  std::vector<float> expected;
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 4; ++c) expected.push_back(buffer[2 + r + 3 * c]);
  EXPECT_EQ(t.to_vector<float>(), expected);
  EXPECT_EQ(t.contiguous().to_vector<float>(), expected);
  EXPECT_EQ(t.storage().nbytes(), 12 * sizeof(float));
}

TEST(DLPack, NullStridesMeanRowMajorAndSizeOneDimsIgnoreTheirStride) {
  std::vector<float> buffer = {1, 2, 3, 4, 5, 6};
  DLPackProducer row_major;
  row_major.shape = {2, 3};
  Tensor t = from_dlpack(row_major.make_versioned(buffer.data(), kDLCpu, kDLFloat32));
  EXPECT_EQ(t.strides(), (Shape{3, 1}));
  EXPECT_EQ(t.to_vector<float>(), buffer);
  DLPackProducer odd;
  odd.shape = {1, 6};
  odd.strides = {-7, 1};  // never stepped along: allowed (PyTorch makes such strides)
  Tensor u = from_dlpack(odd.make_versioned(buffer.data(), kDLCpu, kDLFloat32));
  EXPECT_EQ(u.to_vector<float>(), buffer);
}

TEST(DLPack, ExportOfAViewCarriesItsStridesAndFirstElement) {
  Tensor base = tensor_of(random_values(20, 4), {4, 5}, DType::Float64);
  Tensor view = base.t().narrow(0, 1, 3);  // sizes {3, 4}, strides {1, 5}, offset 1
  dlpack::DLManagedTensorVersioned* m = to_dlpack(view);
  EXPECT_EQ(m->dl_tensor.data, view.data_ptr());
  EXPECT_EQ(m->dl_tensor.data, static_cast<double*>(base.data_ptr()) + 1);
  ASSERT_NE(m->dl_tensor.strides, nullptr);
  EXPECT_EQ(std::vector<std::int64_t>(m->dl_tensor.strides, m->dl_tensor.strides + 2), (std::vector<std::int64_t>{1, 5}));
  Tensor back = from_dlpack(m);
  EXPECT_EQ(back.to_vector<double>(), view.to_vector<double>());
}

TEST(DLPack, NegativeStridesAreRefused) {
  std::vector<float> buffer(4, 1.0f);
  DLPackProducer producer;
  producer.shape = {4};
  producer.strides = {-1};
  const std::string message = message_of<ShapeError>(
      [&] { from_dlpack(producer.make_versioned(buffer.data() + 3, kDLCpu, kDLFloat32)); });
  EXPECT_NE(message.find("expected non-negative strides"), std::string::npos) << message;
  EXPECT_NE(message.find("[-1]"), std::string::npos) << message;
  EXPECT_EQ(producer.deleter_calls, 1) << "from_dlpack takes the tensor over even when it refuses it";
}

TEST(DLPack, ReadOnlyProducerGivesATensorThatRefusesWrites) {
  std::vector<float> buffer = {1, 2, 3, 4};
  DLPackProducer producer;
  producer.shape = {4};
  Tensor t = from_dlpack(producer.make_versioned(buffer.data(), kDLCpu, kDLFloat32, dlpack::kFlagBitmaskReadOnly));
  EXPECT_TRUE(t.storage().read_only());
  EXPECT_EQ(t.add(1.0).to_vector<float>(), (std::vector<float>{2, 3, 4, 5}));  // reads are fine
  const std::string message = message_of<ValueError>([&] { t.add_(1.0); });
  EXPECT_NE(message.find("add_: expected writable memory, found a read-only tensor"), std::string::npos) << message;
  EXPECT_THROW(t.narrow(0, 1, 2).fill_(0.0), ValueError);  // views share the flag
  EXPECT_THROW(t.copy_(Tensor::from_vector<float>({9, 9, 9, 9}, {4})), ValueError);
  EXPECT_THROW(t.storage().bump_version(), ValueError);  // optimizers' in-place updates pass here
  EXPECT_EQ(buffer, (std::vector<float>{1, 2, 3, 4}));
  // Going out again says so; the legacy struct cannot, so it refuses.
  dlpack::DLManagedTensorVersioned* m = to_dlpack(t);
  EXPECT_EQ(m->flags & dlpack::kFlagBitmaskReadOnly, dlpack::kFlagBitmaskReadOnly);
  m->deleter(m);
  EXPECT_THROW(to_dlpack_legacy(t), ValueError);
  Tensor writable = t.clone();
  writable.add_(1.0);
  EXPECT_EQ(writable.to_vector<float>(), (std::vector<float>{2, 3, 4, 5}));
}

TEST(DLPack, AutogradWorksOnImportedTensors) {
  std::vector<double> buffer = {0.5, -1.5, 2.0};
  DLPackProducer producer;
  producer.shape = {3};
  Tensor x = from_dlpack(producer.make_versioned(buffer.data(), kDLCpu, {dlpack::kDLFloat, 64, 1}));
  x.requires_grad_();
  (x * x).sum().backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{1.0, -3.0, 4.0}));
  EXPECT_THROW(to_dlpack(x), ValueError);  // requires grad: export x.detach()
  EXPECT_EQ(from_dlpack(to_dlpack(x.detach())).data_ptr(), buffer.data());
}

TEST(DLPack, BadInputIsRefusedWithWhatWasExpectedAndFound) {
  std::vector<float> buffer(4, 1.0f);
  EXPECT_NE(message_of<ValueError>([] { from_dlpack(static_cast<dlpack::DLManagedTensorVersioned*>(nullptr)); })
                .find("expected a DLManagedTensorVersioned*, got a null pointer"),
            std::string::npos);
  EXPECT_NE(message_of<ValueError>([] { from_dlpack(static_cast<dlpack::DLManagedTensor*>(nullptr)); })
                .find("expected a DLManagedTensor*, got a null pointer"),
            std::string::npos);
  {
    DLPackProducer producer;
    producer.shape = {2};
    const std::string message = message_of<DTypeError>(
        [&] { from_dlpack(producer.make_versioned(buffer.data(), kDLCpu, {dlpack::kDLComplex, 64, 1})); });
    EXPECT_NE(message.find("unsupported dtype complex64"), std::string::npos) << message;
    EXPECT_NE(message.find("sublet takes float32, float64, int64, uint8, bfloat16 and float16"), std::string::npos)
        << message;
    EXPECT_EQ(producer.deleter_calls, 1);
  }
  {
    DLPackProducer producer;
    producer.shape = {1};
    const std::string message = message_of<DTypeError>(
        [&] { from_dlpack(producer.make_versioned(buffer.data(), kDLCpu, {dlpack::kDLFloat, 32, 4})); });
    EXPECT_NE(message.find("float32x4"), std::string::npos) << message;
    EXPECT_EQ(producer.deleter_calls, 1);
  }
  {
    DLPackProducer producer;
    producer.shape = {4};
    const std::string message = message_of<DeviceError>(
        [&] { from_dlpack(producer.make_versioned(buffer.data(), {dlpack::kDLROCM, 0}, kDLFloat32)); });
    EXPECT_NE(message.find("unsupported device kDLROCM (10)"), std::string::npos) << message;
    EXPECT_NE(message.find("sublet takes kDLCPU (1), kDLCUDA (2) and kDLCUDAHost (3)"), std::string::npos) << message;
    EXPECT_EQ(producer.deleter_calls, 1);
  }
  {
    DLPackProducer producer;
    producer.shape = {4};
    dlpack::DLManagedTensorVersioned* m = producer.make_versioned(buffer.data(), kDLCpu, kDLFloat32);
    m->version = {2, 3};
    const std::string message = message_of<ValueError>([&] { from_dlpack(m); });
    EXPECT_NE(message.find("expected DLPack major version 1 (1.x), found 2.3"), std::string::npos) << message;
    EXPECT_EQ(producer.deleter_calls, 1);
  }
  {
    DLPackProducer producer;
    producer.shape = {4, -1};
    EXPECT_THROW(from_dlpack(producer.make_versioned(buffer.data(), kDLCpu, kDLFloat32)), ShapeError);
    EXPECT_EQ(producer.deleter_calls, 1);
  }
  {
    DLPackProducer producer;
    producer.shape = {4};
    EXPECT_NE(message_of<ValueError>([&] { from_dlpack(producer.make_versioned(nullptr, kDLCpu, kDLFloat32)); })
                  .find("expected a data pointer for 4 elements, found null"),
              std::string::npos);
    EXPECT_EQ(producer.deleter_calls, 1);
  }
  if (!memory::cuda_available()) {
    DLPackProducer producer;
    producer.shape = {4};
    const std::string message = message_of<DeviceError>(
        [&] { from_dlpack(producer.make_versioned(buffer.data(), {dlpack::kDLCUDA, 0}, kDLFloat32)); });
    EXPECT_NE(message.find("on kDLCUDA device 0, but sublet sees 0 CUDA device(s)"), std::string::npos) << message;
    EXPECT_EQ(producer.deleter_calls, 1);
  }
  EXPECT_THROW(to_dlpack(Tensor()), ValueError);
}

TEST(DLPack, DtypeNamesForMessages) {
  EXPECT_EQ(dlpack_dtype_name({dlpack::kDLFloat, 32, 1}), "float32");
  EXPECT_EQ(dlpack_dtype_name({dlpack::kDLComplex, 128, 1}), "complex128");
  EXPECT_EQ(dlpack_dtype_name({dlpack::kDLBool, 8, 1}), "bool8");
  EXPECT_EQ(dlpack_dtype_name({dlpack::kDLBfloat, 16, 1}), "bfloat16");
}

}  // namespace
}  // namespace sublet
