#include "runtime/distributed/process_group.h"

#include "core/errors.h"
#include "runtime/distributed/gloo_process_group.h"
#ifdef SUBLET_HAVE_CUDA
#include "runtime/distributed/nccl_process_group.h"
#endif

namespace sublet::distributed {

const char* backend_name(Backend backend) { return backend == Backend::Nccl ? "nccl" : "gloo"; }

Backend parse_backend(const std::string& text, Device device) {
  if (text == "auto") return device.is_cuda() ? Backend::Nccl : Backend::Gloo;
  if (text == "gloo") return Backend::Gloo;
  if (text == "nccl") {
    if (!device.is_cuda())
      throw ValueError("--backend nccl: NCCL connects GPUs, and this run is on " + device.str() +
                       "; use --backend gloo (the default on the CPU)");
    return Backend::Nccl;
  }
  throw ValueError("--backend must be auto, nccl or gloo, got '" + text + "'");
}

std::unique_ptr<ProcessGroup> make_process_group(Backend backend, const LaunchEnv& env, Device device,
                                                 ProcessGroupOptions options) {
  if (backend == Backend::Gloo) return std::make_unique<GlooProcessGroup>(env, device, options);
#ifdef SUBLET_HAVE_CUDA
  if (!device.is_cuda()) throw DeviceError("the NCCL process group needs a CUDA device, got " + device.str());
  return std::make_unique<NcclProcessGroup>(env, device, options);
#else
  throw DeviceError("--backend nccl: this sublet was built without CUDA; use --backend gloo");
#endif
}

}  // namespace sublet::distributed
