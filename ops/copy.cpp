#include "ops/copy.h"

#include <cstring>

#include "core/errors.h"
#include "ops/copy_kernels.h"
#include "ops/device_services.h"

namespace sublet::ops {

void copy(const Context& ctx, const Shape& sizes, DType dst_dtype, StridedRef dst, DType src_dtype,
          ConstStridedRef src) {
  copy_kernels().get("copy", ctx.device, dst_dtype)(ctx, sizes, dst_dtype, std::move(dst), src_dtype,
                                                    std::move(src));
}

void fill(const Context& ctx, DType dtype, const Shape& sizes, StridedRef dst, double value) {
  fill_kernels().get("fill", ctx.device, dtype)(ctx, dtype, sizes, std::move(dst), value);
}

void copy_bytes(Device dst_device, void* dst, Device src_device, const void* src, std::size_t bytes,
                StreamHandle stream) {
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    if (bytes > 0) std::memcpy(dst, src, bytes);
    return;
  }
  // The non-CPU side's backend moves the bytes (for two devices of different types, the
  // destination's; today the only non-CPU type is CUDA).
  const DeviceType backend = dst_device.is_cpu() ? src_device.type : dst_device.type;
  if (const auto copy_fn = device_services(backend).copy_bytes) {
    return copy_fn(dst_device, dst, src_device, src, bytes, stream);
  }
  throw DeviceError("copy from " + src_device.str() + " to " + dst_device.str() +
                    ": host/device copies need the CUDA backend, which is not built in");
}

}  // namespace sublet::ops
