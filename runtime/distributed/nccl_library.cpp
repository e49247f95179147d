#include "runtime/distributed/nccl_library.h"

#include <dlfcn.h>

#include "core/errors.h"
#include "core/loaded_once.h"
#include "core/switch_table.h"
#include "core/tuning.h"

namespace sublet::distributed {
namespace {

// Not named bind: with a std::string argument, argument-dependent lookup finds std::bind, a better
// match for a non-const string, and the slots were silently left null.
template <typename Fn>
void bind_symbol(void* handle, const std::string& path, const char* name, Fn& slot) {
  slot = reinterpret_cast<Fn>(dlsym(handle, name));
  if (!slot)
    throw DistributedError("NCCL library " + path + " has no " + name + "; sublet needs NCCL 2.10 or newer");
}

}  // namespace

NcclLibrary load_nccl(const std::string& path) {
  NcclLibrary lib;
  lib.path = path;
  void* handle = dlopen(lib.path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    throw DistributedError("data parallel needs NCCL, and " + lib.path + " did not load (" + (why ? why : "no reason given") +
                           "); install NCCL, put its lib directory on LD_LIBRARY_PATH (PyTorch's virtual environments "
                           "carry one under site-packages/nvidia/nccl/lib), or set " + std::string(kNcclLibrarySwitch) + " to the file");
  }
  bind_symbol(handle, lib.path, "ncclGetVersion", lib.get_version);
  bind_symbol(handle, lib.path, "ncclGetUniqueId", lib.get_unique_id);
  bind_symbol(handle, lib.path, "ncclCommInitRank", lib.comm_init_rank);
  bind_symbol(handle, lib.path, "ncclCommDestroy", lib.comm_destroy);
  bind_symbol(handle, lib.path, "ncclCommAbort", lib.comm_abort);
  bind_symbol(handle, lib.path, "ncclCommGetAsyncError", lib.comm_get_async_error);
  bind_symbol(handle, lib.path, "ncclGetErrorString", lib.get_error_string);
  bind_symbol(handle, lib.path, "ncclAllReduce", lib.all_reduce);
  bind_symbol(handle, lib.path, "ncclBroadcast", lib.broadcast);
  bind_symbol(handle, lib.path, "ncclGroupStart", lib.group_start);
  bind_symbol(handle, lib.path, "ncclGroupEnd", lib.group_end);
  if (lib.get_version(&lib.version) != ncclSuccess || lib.version < 21000)
    throw DistributedError("NCCL library " + lib.path + " is version " + std::to_string(lib.version) +
                           "; sublet needs 2.10 or newer (ncclAvg)");
  return lib;  // the handle stays open for the life of the process
}

const NcclLibrary& nccl() {
  static LoadedOnce<NcclLibrary> library;
  return library.get([] { return load_nccl(tuning().nccl_library); });
}

void check_nccl(ncclResult_t result, const char* what) {
  if (result == ncclSuccess) return;
  const char* text = nccl().get_error_string ? nccl().get_error_string(result) : "";
  throw DistributedError(std::string(what) + ": NCCL error " + std::to_string(static_cast<int>(result)) + " (" +
                         (text ? text : "") + ")");
}

}  // namespace sublet::distributed
