// Pinned batch buffers: reuse through the free list (no second cudaHostAlloc for the same
// size), the cap on cached buffers, and an asynchronous upload that lands the right values and
// keeps its buffer out of circulation until the copy has finished.
#include <gtest/gtest.h>

#include <numeric>

#include "memory/current_stream.h"
#include "core/errors.h"
#include "memory/registry.h"
#include "runtime/pinned_buffer.h"
#include "runtime/tensor.h"
#include "tests/gpu_skip.h"

namespace sublet {
namespace {

TEST(PinnedBuffer, ReusesReleasedBuffers) {
  SUBLET_SKIP_WITHOUT_GPU("pinned buffer reuse");
  PinnedBatchBuffers pinned(2);
  auto allocate = pinned.allocator();
  float* first = nullptr;
  {
    data::BatchBuffer a = allocate(1000);
    first = a.data();
    a.data()[999] = 1.0f;  // writable over its whole size
  }
  EXPECT_EQ(pinned.cached_buffers(), 1u);
  data::BatchBuffer b = allocate(800);  // fits in the released one
  EXPECT_EQ(b.data(), first);
  EXPECT_EQ(b.size(), 800u);
  EXPECT_EQ(pinned.host_allocations(), 1);
  {
    data::BatchBuffer c = allocate(10), d = allocate(20), e = allocate(30);
  }
  EXPECT_EQ(pinned.cached_buffers(), 2u) << "the cap of two cached buffers";
  EXPECT_EQ(pinned.host_allocations(), 4);
}

TEST(PinnedBuffer, AsyncUploadDeliversTheBatch) {
  SUBLET_SKIP_WITHOUT_GPU("pinned upload");
  const Device gpu = Device::cuda(0);
  PinnedBatchBuffers pinned(4);
  Tensor on_device = Tensor::empty({4096}, TensorOptions().device(gpu));
  float* used = nullptr;
  {
    data::BatchBuffer batch = pinned.allocate(4096);
    std::iota(batch.data(), batch.data() + 4096, 0.0f);
    used = batch.data();
    pinned.copy_to_device_async(batch.data(), on_device.data_ptr(), on_device.nbytes(), gpu,
                                memory::current_stream(gpu));
  }  // released while the copy may still run
  data::BatchBuffer next = pinned.allocate(4096);
  // Either the copy had finished (and the buffer is reused) or a fresh one was made; both are
  // safe, and the uploaded values must be intact.
  if (next.data() == used) {
    EXPECT_EQ(pinned.host_allocations(), 1);
  }
  std::fill(next.data(), next.data() + 4096, -1.0f);
  const auto values = on_device.to(Device::cpu()).to_vector<float>();
  for (int i = 0; i < 4096; i += 511) EXPECT_EQ(values[static_cast<std::size_t>(i)], static_cast<float>(i));
  EXPECT_THROW(pinned.copy_to_device_async(on_device.data<float>(), on_device.data_ptr(), 4, gpu, nullptr),
               ValueError);
}

}  // namespace
}  // namespace sublet
