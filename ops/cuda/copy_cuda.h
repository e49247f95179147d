#pragma once
// CUDA kernels behind ops/copy.h: strided cast-copy and fill on one device, and the byte
// copies between host and device memory (and between two devices).
#include "ops/copy.h"

namespace sublet::ops::cuda {

void copy(const Context& ctx, const Shape& sizes, DType dst_dtype, StridedRef dst, DType src_dtype,
          ConstStridedRef src);
void fill(const Context& ctx, DType dtype, const Shape& sizes, StridedRef dst, double value);

// At least one side is a CUDA device. `stream` nullptr means the current stream of the CUDA
// device involved. A copy that touches host memory returns only when the bytes have arrived
// (the host buffer may be a temporary, as in Tensor::to(cpu)); a device-to-device copy on one
// device stays asynchronous on the stream; a copy between two GPUs waits for both streams.
void copy_bytes(Device dst_device, void* dst, Device src_device, const void* src, std::size_t bytes,
                StreamHandle stream);

}  // namespace sublet::ops::cuda
