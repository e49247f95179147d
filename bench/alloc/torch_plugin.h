#pragma once
// The "torch" column of `sublet bench alloc` as a plugin: a shared object, built against whatever
// PyTorch is installed, that the sublet binary loads at run time (torch_plugin_loader.h).
//
// Why a plugin. sublet itself must build and run without LibTorch: CI and most machines have
// none, and LibTorch's CMake package needs the whole of PyTorch's build environment (and, for
// CUDA, a toolkit matching the wheel). Yet the comparison with PyTorch's allocator is the point
// of the benchmark on the GPU machine, which has PyTorch but not sublet's build dependencies.
// So the PyTorch side is three small files (torch_plugin.cpp, torch_tensors.cpp and, with CUDA,
// torch_allocator.cpp) that include only this header, the two interfaces below and
// core/errors.h (through torch_errors.h), and that compile as C++17 (PyTorch's headers; the
// target machine's compiler is unknown). scripts/build_torch_plugin.sh builds them with plain
// `c++` against the python3 on PATH in well under a minute, without rebuilding sublet:
//   scripts/build_torch_plugin.sh build/libsublet_torch_bench.so
//   build/sublet bench alloc --torch-plugin build/libsublet_torch_bench.so
// (-DSUBLET_WITH_LIBTORCH=ON builds the same plugin as a CMake target and bakes its path in as
// the default.)
//
// The ABI. One extern "C" entry point, sublet_torch_bench_plugin(), returns a TorchBenchPlugin
// that lives as long as the plugin. Its first member, abi_version, is the only part frozen
// forever: the loader reads it before anything else and refuses any other number than
// kTorchPluginAbiVersion, so a plugin built from another sublet's sources fails with a message
// instead of calling through a struct of another shape. Bump the version whenever this struct,
// AllocatorUnderTest (allocator_under_test.h), TensorFactoryUnderTest or TensorShape
// (tensor_factory_under_test.h) change.
//  - Objects: create_* return objects made with `new` in the plugin; the caller destroys them
//    through their virtual destructor, which (with the vtable) lives in the plugin, so the
//    plugin's own operator delete frees them. The loader never unloads a plugin (LibTorch does
//    not support being unloaded), so those vtables stay valid until the process exits.
//  - Strings: only `const char*` cross. No std::string, std::vector or other library type
//    whose layout depends on _GLIBCXX_USE_CXX11_ABI crosses the boundary (std::optional and
//    std::array do, which have one layout), so a plugin may be built with the ABI flag of its
//    PyTorch whatever sublet was built with.
//  - Errors: the functions may throw; they throw sublet::Error (c10 errors are translated, see
//    torch_tensors.cpp) and the bench catches std::exception, whose type_info is libstdc++'s.
//  - Devices: `device` is kTorchPluginCpu (-1) for the CPU, or a CUDA device index >= 0 (only
//    when has_cuda is true).
#include <cstdint>

#include "bench/alloc/allocator_under_test.h"
#include "bench/alloc/tensor_factory_under_test.h"

namespace sublet::bench {

inline constexpr std::uint32_t kTorchPluginAbiVersion = 1;
inline constexpr int kTorchPluginCpu = -1;

struct TorchBenchPlugin {
  // Frozen for every version (see above).
  std::uint32_t abi_version;

  // Version 1.
  const char* torch_version;  // TORCH_VERSION of the headers it was built against: "2.11.0+cu130"
  bool has_cuda;              // built with c10/cuda: the CUDA caching allocator is in it
  // The "torch" column's allocator: c10's CPU allocator (raw_allocate/raw_deallocate) for
  // kTorchPluginCpu, the CUDA caching allocator (raw_alloc/raw_delete) for a CUDA device.
  AllocatorUnderTest* (*create_allocator)(int device);
  // Its tensor rows: at::empty and the tensor's destructor on that device.
  TensorFactoryUnderTest* (*create_tensor_factory)(int device);
  // One line each for the table's legend and the JSON. The text belongs to the plugin and stays
  // valid until the same function is called again on the same thread: copy it at once.
  const char* (*allocator_description)(int device);
  const char* (*tensor_description)(int device);
};

}  // namespace sublet::bench

#define SUBLET_TORCH_BENCH_PLUGIN_ENTRY "sublet_torch_bench_plugin"

// Defined by the plugin, with default visibility (the plugin is built -fvisibility=hidden).
extern "C" __attribute__((visibility("default"))) const sublet::bench::TorchBenchPlugin* sublet_torch_bench_plugin();
