// The torch plugin's entry point (torch_plugin.h): PyTorch's allocators and at::empty behind the
// plugin ABI. C++17; built by scripts/build_torch_plugin.sh or, with -DSUBLET_WITH_LIBTORCH=ON,
// by CMake. SUBLET_TORCH_PLUGIN_WITH_CUDA adds the CUDA caching allocator (torch_allocator.cpp).
#include "bench/alloc/torch_plugin.h"

#include <torch/version.h>

#include <string>

#include "bench/alloc/torch_tensors.h"

namespace sublet::bench {
namespace {

AllocatorUnderTest* create_allocator(int device) { return make_torch_allocator(device).release(); }

TensorFactoryUnderTest* create_tensor_factory(int device) { return new TorchTensorFactory(device); }

const char* allocator_description(int device) {
  thread_local std::string text;
  text = torch_allocator_description(device);
  return text.c_str();
}

const char* tensor_description(int device) {
  thread_local std::string text;
  text = TorchTensorFactory::description(device);
  return text.c_str();
}

#ifdef SUBLET_TORCH_PLUGIN_WITH_CUDA
constexpr bool kHasCuda = true;
#else
constexpr bool kHasCuda = false;
#endif

const TorchBenchPlugin kPlugin = {kTorchPluginAbiVersion, TORCH_VERSION,          kHasCuda,          create_allocator,
                                  create_tensor_factory,  allocator_description, tensor_description};

}  // namespace
}  // namespace sublet::bench

extern "C" const sublet::bench::TorchBenchPlugin* sublet_torch_bench_plugin() { return &sublet::bench::kPlugin; }
