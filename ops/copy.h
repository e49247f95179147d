#pragma once
// Copies, casts and fills. copy_bytes is the single place where bytes cross between host and
// device memory: the CUDA backend provides it as a device service (ops/device_services.h) and
// cudaMemcpyAsync is called nowhere else in ops/.
#include <cstddef>

#include "ops/context.h"
#include "core/dtype.h"
#include "ops/strided.h"

namespace sublet::ops {

// dst = cast(src) elementwise over `sizes`; both on ctx.device.
void copy(const Context& ctx, const Shape& sizes, DType dst_dtype, StridedRef dst, DType src_dtype,
          ConstStridedRef src);

void fill(const Context& ctx, DType dtype, const Shape& sizes, StridedRef dst, double value);

// Contiguous bytes between any two devices (host <-> CPU tensors are the same memory space).
// Throws DeviceError when a side's backend is not built in.
void copy_bytes(Device dst_device, void* dst, Device src_device, const void* src, std::size_t bytes,
                StreamHandle stream = nullptr);

}  // namespace sublet::ops
