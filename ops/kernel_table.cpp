#include "ops/kernel_table.h"

#include <string>

#include "core/errors.h"

namespace sublet::ops {

namespace {

const char* device_type_name(DeviceType type) { return type == DeviceType::CPU ? "cpu" : "cuda"; }

}  // namespace

void KernelTableBase::store(DeviceType device, DType dtype, MemoryFormat format, ErasedFn fn) {
  slots_[index(device, dtype, format)].store(Slot{fn}, std::memory_order_release);
}

void KernelTableBase::clear() {
  for (auto& slot : slots_) slot.store(Slot{}, std::memory_order_release);
}

bool KernelTableBase::has(DeviceType device, DType dtype, MemoryFormat format) const {
  ensure_kernels_registered();
  return load(index(device, dtype, format)) != nullptr;
}

std::string KernelTableBase::describe() const {
  // One group per (device type, memory format): "cpu float32/float64 contiguous".
  std::string text;
  for (int d = 0; d < kNumDeviceTypes; ++d) {
    for (int f = 0; f < kNumMemoryFormats; ++f) {
      std::string dtypes;
      for (int t = 0; t < kNumDTypes; ++t) {
        const auto device = static_cast<DeviceType>(d);
        const auto dtype = static_cast<DType>(t);
        const auto format = static_cast<MemoryFormat>(f);
        if (load(index(device, dtype, format)) == nullptr) continue;
        if (!dtypes.empty()) dtypes += "/";
        dtypes += dtype_name(dtype);
      }
      if (dtypes.empty()) continue;
      if (!text.empty()) text += ", ";
      text += std::string(device_type_name(static_cast<DeviceType>(d))) + " " + dtypes + " " +
              memory_format_name(static_cast<MemoryFormat>(f));
    }
  }
  return text;
}

KernelTableBase::ErasedFn KernelTableBase::get_slow(const char* op, Device device, DType dtype,
                                                    MemoryFormat format) const {
  ensure_kernels_registered();
  const std::size_t i = index(device.type, dtype, format);
  if (const ErasedFn fn = slots_[i].load(std::memory_order_acquire).fn) return fn;
  const std::string available = describe();
  throw DTypeError(std::string(op) + ": no kernel for " + dtype_name(dtype) + " " + memory_format_name(format) +
                   " on " + device.str() +
                   (available.empty() ? std::string("; no device has a kernel for it in this build")
                                      : "; kernels exist for " + available));
}

}  // namespace sublet::ops
