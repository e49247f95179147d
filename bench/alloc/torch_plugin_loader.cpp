#include "bench/alloc/torch_plugin_loader.h"

#include <dlfcn.h>

#include <exception>
#include <filesystem>
#include <map>
#include <mutex>

#include "core/errors.h"

namespace sublet::bench {
namespace {

// How to make a good one at `path`.
std::string build_hint(const std::string& path) { return "scripts/build_torch_plugin.sh " + path; }

int plugin_device(Device device) { return device.is_cpu() ? kTorchPluginCpu : device.index; }

std::string dl_error() {
  const char* text = dlerror();
  return text ? text : "no reason given";
}

// Opens the file and finds the plugin's description; the handle is never closed (a library that
// loaded PyTorch cannot be unloaded safely, and a failed load ends the run anyway).
const TorchBenchPlugin* open_plugin(const std::string& path) {
  std::error_code error;
  const std::filesystem::file_status status = std::filesystem::status(path, error);
  if (!std::filesystem::exists(status))
    throw IoError("torch plugin " + path + ": no such file (build it with " + build_hint(path) + ")");
  if (std::filesystem::is_directory(status)) throw IoError("torch plugin " + path + ": expected a shared object, found a folder");

  // An absolute path: dlopen searches LD_LIBRARY_PATH for a bare file name instead of opening it.
  const std::string absolute = std::filesystem::absolute(path, error).string();
  dlerror();
  void* handle = dlopen(absolute.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle)
    throw Error("torch plugin " + path + ": cannot load it: " + dl_error() +
                " (a plugin works with the PyTorch it was built against: rebuild it on this machine with " +
                build_hint(path) + ")");

  dlerror();
  void* symbol = dlsym(handle, SUBLET_TORCH_BENCH_PLUGIN_ENTRY);
  if (!symbol)
    throw Error("torch plugin " + path + ": expected the entry point " SUBLET_TORCH_BENCH_PLUGIN_ENTRY
                "(), found no such symbol (" + dl_error() + "); is it a sublet torch plugin? " + build_hint(path) +
                " builds one");
  const auto entry = reinterpret_cast<decltype(&sublet_torch_bench_plugin)>(symbol);
  const TorchBenchPlugin* plugin = entry();
  if (!plugin) throw Error("torch plugin " + path + ": " SUBLET_TORCH_BENCH_PLUGIN_ENTRY "() returned no plugin description");
  if (plugin->abi_version != kTorchPluginAbiVersion)
    throw Error("torch plugin " + path + ": expected plugin ABI version " + std::to_string(kTorchPluginAbiVersion) +
                ", found " + std::to_string(plugin->abi_version) +
                " (it was built from another version of sublet's sources; rebuild it from this one with " +
                build_hint(path) + ")");
  if (!plugin->torch_version || !plugin->create_allocator || !plugin->create_tensor_factory ||
      !plugin->allocator_description || !plugin->tensor_description)
    throw Error("torch plugin " + path + ": ABI version " + std::to_string(plugin->abi_version) +
                " but its description has empty entries (expected the torch version and four functions)");
  return plugin;
}

}  // namespace

TorchPlugin::TorchPlugin(std::string path, const TorchBenchPlugin* plugin)
    : path_(std::move(path)), torch_version_(plugin->torch_version), plugin_(plugin) {}

const TorchPlugin& TorchPlugin::load(const std::string& path) {
  static std::mutex mutex;
  // Never destroyed: plugins stay loaded until the process exits (see the header).
  static auto* loaded = new std::map<std::string, std::unique_ptr<TorchPlugin>>();
  std::error_code error;
  std::string key = std::filesystem::weakly_canonical(path, error).string();
  if (error) key = path;
  const std::lock_guard<std::mutex> lock(mutex);
  if (const auto it = loaded->find(key); it != loaded->end()) return *it->second;
  std::unique_ptr<TorchPlugin> plugin(new TorchPlugin(path, open_plugin(path)));
  return *loaded->emplace(key, std::move(plugin)).first->second;
}

void TorchPlugin::check_device(Device device) const {
  if (device.is_cuda() && !has_cuda())
    throw DeviceError("torch plugin " + path_ + " was built without CUDA (its PyTorch " + torch_version_ +
                      " has none), so it has no torch column for " + device.str() +
                      "; rebuild it with " + build_hint(path_) + " where python3's torch has CUDA, or leave it out");
}

std::unique_ptr<AllocatorUnderTest> TorchPlugin::make_allocator(Device device) const {
  check_device(device);
  return std::unique_ptr<AllocatorUnderTest>(plugin_->create_allocator(plugin_device(device)));
}

std::unique_ptr<TensorFactoryUnderTest> TorchPlugin::make_tensors(Device device) const {
  check_device(device);
  return std::unique_ptr<TensorFactoryUnderTest>(plugin_->create_tensor_factory(plugin_device(device)));
}

std::string TorchPlugin::allocator_description(Device device) const {
  check_device(device);
  try {
    return plugin_->allocator_description(plugin_device(device));
  } catch (const std::exception& e) {
    throw Error("torch plugin " + path_ + ": describing its allocator on " + device.str() + ": " + e.what());
  }
}

std::string TorchPlugin::tensor_description(Device device) const {
  check_device(device);
  try {
    return plugin_->tensor_description(plugin_device(device));
  } catch (const std::exception& e) {
    throw Error("torch plugin " + path_ + ": describing its tensors on " + device.str() + ": " + e.what());
  }
}

}  // namespace sublet::bench
