#pragma once
// Loads a torch plugin (torch_plugin.h) into the sublet process: dlopen(RTLD_NOW | RTLD_LOCAL),
// so that a missing PyTorch library or symbol fails here, with the loader's words, and not
// halfway through a benchmark; and so that PyTorch's symbols stay out of sublet's namespace.
// A plugin, once loaded, stays loaded until the process exits: LibTorch cannot be unloaded, and
// the objects it made carry vtables that live in it.
#include <memory>
#include <string>

#include "bench/alloc/allocator_under_test.h"
#include "bench/alloc/tensor_factory_under_test.h"
#include "bench/alloc/torch_plugin.h"
#include "core/device.h"

namespace sublet::bench {

class TorchPlugin {
 public:
  // The plugin at `path`, loaded on the first call for that file (later calls return the same
  // object). Throws sublet::Error naming the path when the file is missing, dlopen fails (with
  // dlerror()'s text: a PyTorch library not found, an undefined symbol), the entry point
  // sublet_torch_bench_plugin is missing, or its ABI version is not kTorchPluginAbiVersion.
  static const TorchPlugin& load(const std::string& path);

  const std::string& path() const { return path_; }
  const std::string& torch_version() const { return torch_version_; }
  bool has_cuda() const { return plugin_->has_cuda; }

  // Throws DeviceError, naming the plugin and its PyTorch, when `device` is CUDA and the plugin
  // was built without CUDA.
  void check_device(Device device) const;

  // The column's allocator and tensors on `device` (check_device first); destroyed through their
  // virtual destructors, i.e. by the plugin's code.
  std::unique_ptr<AllocatorUnderTest> make_allocator(Device device) const;
  std::unique_ptr<TensorFactoryUnderTest> make_tensors(Device device) const;
  std::string allocator_description(Device device) const;
  std::string tensor_description(Device device) const;

 private:
  TorchPlugin(std::string path, const TorchBenchPlugin* plugin);

  std::string path_;
  std::string torch_version_;
  const TorchBenchPlugin* plugin_;  // owned by the plugin, valid for the whole process
};

}  // namespace sublet::bench
