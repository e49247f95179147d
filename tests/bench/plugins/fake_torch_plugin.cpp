// A stand-in for the torch plugin (bench/alloc/torch_plugin.h) that needs no PyTorch: malloc and
// free behind the plugin ABI, so that the loader and the torch column run in CI. Built three
// times by tests/bench/CMakeLists.txt, as C++17 like the real plugin (which also checks that the
// ABI headers compile as C++17):
//   sublet_test_fake_torch_plugin:    a working CPU-only plugin (torch version "0.0.0-fake");
//   sublet_test_plugin_wrong_abi:     FAKE_PLUGIN_ABI_VERSION=999, as if from another sublet;
//   sublet_test_plugin_without_entry: FAKE_PLUGIN_WITHOUT_ENTRY, no sublet_torch_bench_plugin.
#include <cstdlib>
#include <new>
#include <string>

#include "bench/alloc/torch_plugin.h"
#include "core/errors.h"

#ifndef FAKE_PLUGIN_ABI_VERSION
#define FAKE_PLUGIN_ABI_VERSION sublet::bench::kTorchPluginAbiVersion
#endif

namespace {

using sublet::bench::AllocationHandle;
using sublet::bench::AllocatorUnderTest;
using sublet::bench::TensorFactoryUnderTest;
using sublet::bench::TensorShape;

void* checked_malloc(std::size_t bytes) {
  void* p = std::malloc(bytes);
  if (!p) throw sublet::OutOfMemoryError("fake torch plugin: malloc(" + std::to_string(bytes) + ") failed");
  return p;
}

void check_cpu(int device) {
  if (device != sublet::bench::kTorchPluginCpu)
    throw sublet::DeviceError("fake torch plugin: cuda:" + std::to_string(device) + " asked of a CPU-only plugin");
}

class FakeAllocator final : public AllocatorUnderTest {
 public:
  AllocationHandle allocate(std::size_t bytes) override {
    ++calls_;
    return checked_malloc(bytes);
  }
  void free(AllocationHandle handle) override { std::free(handle); }
  std::optional<std::uint64_t> peak_reserved_bytes() const override { return std::nullopt; }
  std::optional<std::uint64_t> driver_allocation_calls() const override { return calls_; }

 private:
  std::uint64_t calls_ = 0;
};

// A "tensor" is a heap header plus its malloc'ed bytes, like a TensorImpl with its storage.
struct FakeTensor {
  std::int64_t sizes[2];
  void* data;
};
FakeTensor* volatile tensor_sink = nullptr;

class FakeTensors final : public TensorFactoryUnderTest {
 public:
  void create_destroy(const TensorShape& shape, std::size_t count) override {
    std::size_t bytes = sizeof(float);
    for (std::size_t d = 0; d < shape.ndim; ++d) bytes *= static_cast<std::size_t>(shape.dims[d]);
    for (std::size_t i = 0; i < count; ++i) {
      auto* t = new FakeTensor{{shape.dims[0], shape.dims[1]}, allocator_.allocate(bytes)};
      tensor_sink = t;
      allocator_.free(t->data);
      delete t;
    }
  }
  void allocate_free(std::size_t bytes, std::size_t count) override {
    for (std::size_t i = 0; i < count; ++i) allocator_.free(allocator_.allocate(bytes));
  }
  std::optional<std::uint64_t> peak_reserved_bytes() const override { return std::nullopt; }
  std::optional<std::uint64_t> driver_allocation_calls() const override { return allocator_.driver_allocation_calls(); }

 private:
  FakeAllocator allocator_;
};

AllocatorUnderTest* create_allocator(int device) {
  check_cpu(device);
  return new FakeAllocator();
}

TensorFactoryUnderTest* create_tensor_factory(int device) {
  check_cpu(device);
  return new FakeTensors();
}

const char* allocator_description(int device) {
  check_cpu(device);
  return "fake torch 0.0.0-fake (test plugin): malloc/free";
}

const char* tensor_description(int device) {
  check_cpu(device);
  return "fake torch 0.0.0-fake (test plugin): a heap header and malloc/free per tensor";
}

const sublet::bench::TorchBenchPlugin kPlugin = {FAKE_PLUGIN_ABI_VERSION, "0.0.0-fake",         false, create_allocator,
                                                 create_tensor_factory,   allocator_description, tensor_description};

}  // namespace

#ifdef FAKE_PLUGIN_WITHOUT_ENTRY
// Some other symbol, so that the file is a valid shared object that only lacks the entry point.
extern "C" __attribute__((visibility("default"))) const sublet::bench::TorchBenchPlugin* some_other_plugin() { return &kPlugin; }
#else
extern "C" const sublet::bench::TorchBenchPlugin* sublet_torch_bench_plugin() { return &kPlugin; }
#endif
