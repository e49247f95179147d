#include "runtime/distributed/gloo_library.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>

#include "core/errors.h"
#include "core/loaded_once.h"
#include "core/switch_table.h"
#include "core/tuning.h"

namespace sublet::distributed {
namespace {

constexpr const char* kShimFile = "libsublet_gloo.so";

GlooLibrary load() {
  std::string tried;
  for (const std::string& path : gloo_shim_candidates()) {
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* why = dlerror();
      tried += "\n  " + path + ": " + (why ? why : "did not load");
      continue;
    }
    const auto version = reinterpret_cast<gloo_shim::AbiVersionFunction>(dlsym(handle, gloo_shim::kAbiVersionSymbol));
    const auto connect = reinterpret_cast<gloo_shim::ConnectFunction>(dlsym(handle, gloo_shim::kConnectSymbol));
    if (!version || !connect || version() != gloo_shim::kAbiVersion) {
      tried += "\n  " + path + ": not a shim of this sublet build (interface version " +
               (version ? std::to_string(version()) : std::string("missing")) + ", expected " +
               std::to_string(gloo_shim::kAbiVersion) + ")";
      dlclose(handle);
      continue;
    }
    return {.path = path, .connect = connect};  // the handle stays open for the life of the process
  }
  throw DistributedError("--backend gloo needs sublet's Gloo shim (" + std::string(kShimFile) +
                         ") and Debian's libgloo0 (libgloo.so.0 with libhiredis, libibverbs and libnl), and none "
                         "loaded:" + tried +
                         "\ninstall libgloo-dev (scripts/setup.sh), copy the shim and those libraries next to the "
                         "sublet binary, or set " + std::string(kGlooLibrarySwitch) + " to the shim; or use --backend nccl on GPUs");
}

}  // namespace

std::vector<std::string> gloo_shim_candidates() {
  if (!tuning().gloo_library.empty()) return {tuning().gloo_library};
  std::vector<std::string> candidates;
  std::error_code error;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) candidates.push_back((exe.parent_path() / kShimFile).string());
#ifdef SUBLET_GLOO_SHIM_BUILD_PATH
  candidates.push_back(SUBLET_GLOO_SHIM_BUILD_PATH);
#endif
  return candidates;
}

const GlooLibrary& gloo() {
  static LoadedOnce<GlooLibrary> library;
  return library.get(load);
}

}  // namespace sublet::distributed
