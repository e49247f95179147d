#include "ops/copy.h"

#include <cstring>

#include "core/errors.h"
#include "ops/cpu/copy_cpu.h"
#ifdef SUBLET_HAVE_CUDA
#include "ops/cuda/copy_cuda.h"
#endif

namespace sublet::ops {

// Dispatch points: CUDA kernels go beside the CPU ones (ops/cuda/) and are selected here.
void copy(const Context& ctx, const Shape& sizes, DType dst_dtype, StridedRef dst, DType src_dtype,
          ConstStridedRef src) {
  if (ctx.device.is_cpu()) return cpu::copy(sizes, dst_dtype, std::move(dst), src_dtype, std::move(src));
#ifdef SUBLET_HAVE_CUDA
  if (ctx.device.is_cuda()) {
    return cuda::copy(ctx, sizes, dst_dtype, std::move(dst), src_dtype, std::move(src));
  }
#endif
  throw DeviceError("copy: no kernel for " + ctx.device.str() + " yet");
}

void fill(const Context& ctx, DType dtype, const Shape& sizes, StridedRef dst, double value) {
  if (ctx.device.is_cpu()) return cpu::fill(dtype, sizes, std::move(dst), value);
#ifdef SUBLET_HAVE_CUDA
  if (ctx.device.is_cuda()) return cuda::fill(ctx, dtype, sizes, std::move(dst), value);
#endif
  throw DeviceError("fill: no kernel for " + ctx.device.str() + " yet");
}

void copy_bytes(Device dst_device, void* dst, Device src_device, const void* src, std::size_t bytes,
                [[maybe_unused]] StreamHandle stream) {
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    if (bytes > 0) std::memcpy(dst, src, bytes);
    return;
  }
#ifdef SUBLET_HAVE_CUDA
  return cuda::copy_bytes(dst_device, dst, src_device, src, bytes, stream);
#endif
  throw DeviceError("copy from " + src_device.str() + " to " + dst_device.str() +
                    ": host/device copies need the CUDA backend, which is not built yet");
}

}  // namespace sublet::ops
