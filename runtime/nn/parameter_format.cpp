#include "runtime/nn/parameter_format.h"

#include "ops/conv2d_kernels.h"

namespace sublet::nn {

MemoryFormat parameter_format_for(Device device, MemoryFormat requested) {
  if (requested != MemoryFormat::ChannelsLast) return requested;
  const bool native = ops::conv2d_forward_kernels().has(device.type, DType::Float32, MemoryFormat::ChannelsLast);
  return native ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous;
}

}  // namespace sublet::nn
