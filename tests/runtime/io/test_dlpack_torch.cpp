// The real-client check of DLPack (runtime/io/dlpack.h): a sublet tensor goes to PyTorch
// (at::fromDLPack), is doubled in place there (mul_(2)), and comes back (at::toDLPack), through
// the plugin of tests/runtime/io/torch_dlpack_plugin.cpp. Same data pointer all the way, the
// values doubled in sublet's own tensor, the strides kept, and the memory back in sublet's
// allocator only when both frameworks have let go.
//
// The plugin: CMake builds it when a python3 with torch is found at configure time (see
// tests/runtime/io/dlpack.cmake); SUBLET_TORCH_DLPACK_PLUGIN=PATH runs against another one (the GPU
// machine: scripts/build_torch_plugin.sh --dlpack PATH). Without either the tests skip and say why.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "memory/registry.h"
#include "runtime/io/dlpack.h"
#include "runtime/tensor.h"
#include "tests/gpu_skip.h"

namespace sublet {
namespace {

using RoundTrip = int (*)(void* input, void** output, void** torch_data, char* error, std::size_t error_size);

struct TorchPlugin {
  std::string version;
  bool has_cuda = false;
  bool has_versioned = false;
  RoundTrip double_legacy = nullptr;
  RoundTrip double_versioned = nullptr;
};

// The plugin, loaded once (PyTorch is never unloaded); null with the reason when there is none.
const TorchPlugin* torch_plugin(std::string* why_not) {
  static std::string failure;
  static const TorchPlugin* plugin = [] () -> const TorchPlugin* {
    std::string path;
    if (const char* env = std::getenv("SUBLET_TORCH_DLPACK_PLUGIN"); env != nullptr && *env != '\0') {
      path = env;
    } else {
#ifdef SUBLET_TORCH_DLPACK_PLUGIN_PATH
      path = SUBLET_TORCH_DLPACK_PLUGIN_PATH;
#else
      failure = SUBLET_TORCH_DLPACK_SKIP;
      return nullptr;
#endif
    }
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      failure = "LOAD FAILED: " + path + ": " + dlerror();
      return nullptr;
    }
    auto* p = new TorchPlugin;
    p->version = reinterpret_cast<const char* (*)()>(dlsym(handle, "sublet_torch_dlpack_version"))();
    p->has_cuda = reinterpret_cast<int (*)()>(dlsym(handle, "sublet_torch_dlpack_has_cuda"))() != 0;
    p->has_versioned = reinterpret_cast<int (*)()>(dlsym(handle, "sublet_torch_dlpack_has_versioned"))() != 0;
    p->double_legacy = reinterpret_cast<RoundTrip>(dlsym(handle, "sublet_torch_dlpack_double_legacy"));
    p->double_versioned = reinterpret_cast<RoundTrip>(dlsym(handle, "sublet_torch_dlpack_double_versioned"));
    return p;
  }();
  *why_not = failure;
  return plugin;
}

// Skips without a plugin (configure found no torch); a plugin that was there but failed to load
// is a failure, not a skip.
#define SUBLET_REQUIRE_TORCH_PLUGIN(plugin)                                        \
  std::string why_not;                                                             \
  const TorchPlugin* plugin = torch_plugin(&why_not);                              \
  if (plugin == nullptr) {                                                         \
    if (why_not.rfind("LOAD FAILED", 0) == 0) FAIL() << why_not;                   \
    GTEST_SKIP() << "no PyTorch to exchange with: " << why_not;                    \
  }

std::vector<double> random_values(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> dist(1, 100);  // doubled: still exact in every dtype, never zero
  std::vector<double> v(n);
  for (double& x : v) x = dist(gen);
  return v;
}

std::vector<double> values_of(const Tensor& t) { return t.to(Device::cpu()).to(DType::Float64).to_vector<double>(); }

std::vector<double> doubled(std::vector<double> v) {
  for (double& x : v) x *= 2;
  return v;
}

// Sends `view` to PyTorch as the legacy or the versioned struct and returns what comes back.
Tensor double_in_torch(const TorchPlugin& plugin, const Tensor& view, bool versioned) {
  void* out = nullptr;
  void* torch_data = nullptr;
  char error[512] = "";
  const int status = versioned ? plugin.double_versioned(to_dlpack(view), &out, &torch_data, error, sizeof error)
                               : plugin.double_legacy(to_dlpack_legacy(view), &out, &torch_data, error, sizeof error);
  EXPECT_EQ(status, 0) << "PyTorch " << plugin.version << ": " << error;
  if (status != 0) return Tensor();
  EXPECT_EQ(torch_data, view.data_ptr()) << "PyTorch saw another data pointer: a copy was made";
  return versioned ? from_dlpack(static_cast<dlpack::DLManagedTensorVersioned*>(out))
                   : from_dlpack(static_cast<dlpack::DLManagedTensor*>(out));
}

void round_trip_every_dtype(const TorchPlugin& plugin, Device device, bool versioned) {
  const std::size_t before = memory_allocated(device);
  for (DType dtype : {DType::Float32, DType::Float64, DType::Int64, DType::UInt8, DType::BFloat16, DType::Float16}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)) + " on " + device.str());
    const std::vector<double> values = random_values(20, 7);
    Tensor t = Tensor::from_vector(values, {4, 5}).to(dtype).to(device);
    Tensor back = double_in_torch(plugin, t, versioned);
    ASSERT_TRUE(back.defined());
    EXPECT_EQ(back.data_ptr(), t.data_ptr());
    EXPECT_EQ(back.dtype(), dtype);
    EXPECT_EQ(back.device(), device);
    EXPECT_EQ(values_of(t), doubled(values)) << "changed in place in PyTorch, seen in sublet's tensor";
    EXPECT_EQ(values_of(back), doubled(values));
    // sublet lets go first: PyTorch's tensor (inside `back`) still holds sublet's block.
    const std::size_t held = memory_allocated(device);
    t = Tensor();
    EXPECT_EQ(memory_allocated(device), held);
    back = Tensor();  // PyTorch's deleter, then sublet's: the block goes back
    EXPECT_EQ(memory_allocated(device), before);
  }
}

TEST(DLPackTorch, CpuRoundTripLegacyStruct) {
  SUBLET_REQUIRE_TORCH_PLUGIN(plugin);
  round_trip_every_dtype(*plugin, Device::cpu(), /*versioned=*/false);
}

TEST(DLPackTorch, CpuRoundTripVersionedStruct) {
  SUBLET_REQUIRE_TORCH_PLUGIN(plugin);
  if (!plugin->has_versioned) {
    GTEST_SKIP() << "PyTorch " << plugin->version << " has no DLPack 1.x (at::toDLPackVersioned, PyTorch >= 2.9); "
                 << "the legacy struct is checked by CpuRoundTripLegacyStruct";
  }
  round_trip_every_dtype(*plugin, Device::cpu(), /*versioned=*/true);
}

TEST(DLPackTorch, CpuStridedViewKeepsItsStrides) {
  SUBLET_REQUIRE_TORCH_PLUGIN(plugin);
  const std::vector<double> values = random_values(12, 8);
  Tensor base = Tensor::from_vector(values, {3, 4}).to(DType::Float32);
  Tensor view = base.t().narrow(0, 1, 2);  // sizes {2, 3}, strides {1, 4}, offset 1
  Tensor back = double_in_torch(*plugin, view, plugin->has_versioned);
  ASSERT_TRUE(back.defined());
  EXPECT_EQ(back.strides(), view.strides());
  EXPECT_EQ(back.data_ptr(), view.data_ptr());
  std::vector<double> expected = values;
  for (int r = 0; r < 3; ++r)
    for (int c = 1; c < 3; ++c) expected[r * 4 + c] *= 2;  // only the view's elements
  EXPECT_EQ(values_of(base), expected);
}

TEST(DLPackTorch, CudaRoundTrip) {
  SUBLET_SKIP_WITHOUT_GPU("a CUDA tensor doubled in place by PyTorch through DLPack");
  SUBLET_REQUIRE_TORCH_PLUGIN(plugin);
  if (!plugin->has_cuda) {
    GTEST_SKIP() << "PyTorch " << plugin->version << " of the plugin has no CUDA (build it against a CUDA PyTorch: "
                 << "scripts/build_torch_plugin.sh --dlpack PATH, then SUBLET_TORCH_DLPACK_PLUGIN=PATH)";
  }
  round_trip_every_dtype(*plugin, Device::cuda(0), plugin->has_versioned);
}

}  // namespace
}  // namespace sublet
