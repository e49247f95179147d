// The single place where ops/ asks which backends are built in: every other front file finds
// its kernels in the tables (ops/kernel_table.h). A new backend is a folder under ops/ with its
// register_<backend>_kernels() and one call here.
#include "ops/kernel_registration.h"

#include <atomic>
#include <mutex>

#include "ops/kernel_table.h"

namespace sublet::ops {

namespace {
std::once_flag registration_once;
// Set after every registration has returned: lets repeated calls skip call_once's slower path.
std::atomic<bool> registered{false};

void register_all() {
  register_cpu_kernels();
#ifdef SUBLET_HAVE_CUDA
  register_cuda_kernels();
#endif
  registered.store(true, std::memory_order_release);
}
}  // namespace

void ensure_kernels_registered() {
  if (registered.load(std::memory_order_acquire)) return;
  std::call_once(registration_once, register_all);
}

}  // namespace sublet::ops
