#pragma once
// Per-device kernel tables: how an op front file (ops/*.cpp) finds the kernel for a call.
// An op declares its kernel signature and one KernelTable per entry point (ops/<op>_kernels.h);
// each backend fills the tables once, from one registration function (ops/cpu/
// register_cpu_kernels.cpp, ops/cuda/register_cuda_kernels.cpp, called by
// ops/kernel_registration.cpp). The front file checks its arguments and then makes one call:
//   conv2d_forward_kernels().get("conv2d", ctx.device, dtype)(ctx, shape, dtype, ...);
// A device/dtype/memory-format combination with no kernel, including a device whose backend is
// not built in, throws one DTypeError that names the op, dtype, layout and device and lists
// the combinations that do have kernels.
//
// Cost on every op call: get() is one load of the entry and a null check, as the
// `if (device.is_cuda())` branch it replaces. Entries are atomics read relaxed (a plain load on
// x86-64 and arm64): registration writes them once, before or during the first lookup, and a
// lookup that finds an empty entry registers (ensure_kernels_registered) and reads again before
// it throws. Tables are constant-initialised (zeroed arrays), so there is no static
// initialisation order to get wrong, and registration is explicit calls, not static
// self-registering objects that a static library's link would drop.
#include <array>
#include <atomic>
#include <cstddef>
#include <string>

#include "core/device.h"
#include "core/dtype.h"

namespace sublet::ops {


// Registers every built backend's kernels and device services exactly once (thread-safe).
// Lookups call it themselves; tests call it before inspecting tables.
void ensure_kernels_registered();

// The type-erased part: the entries as `void (*)()` (a function pointer converts to another
// function pointer type and back exactly), the slow paths and the error text. Not a template,
// so the error path is compiled once, out of line.
class KernelTableBase {
 public:
  static constexpr std::size_t kSlots =
      std::size_t{kNumDeviceTypes} * std::size_t{kNumDTypes} * std::size_t{kNumMemoryFormats};

  constexpr KernelTableBase() = default;
  KernelTableBase(const KernelTableBase&) = delete;
  KernelTableBase& operator=(const KernelTableBase&) = delete;

  // Whether a kernel is registered (registers first if nothing has been yet).
  bool has(DeviceType device, DType dtype, MemoryFormat format = MemoryFormat::Contiguous) const;
  // "cpu float32/float64 contiguous, cuda float32/float64 contiguous", or "" when empty.
  std::string describe() const;
  // Empties every entry (tests that build their own tables; never on the op tables).
  void clear();

 protected:
  using ErasedFn = void (*)();
  struct Slot {
    ErasedFn fn = nullptr;
  };

  static constexpr std::size_t index(DeviceType device, DType dtype, MemoryFormat format) {
    return (static_cast<std::size_t>(device) * kNumDTypes + static_cast<std::size_t>(dtype)) * kNumMemoryFormats +
           static_cast<std::size_t>(format);
  }
  ErasedFn load(std::size_t i) const { return slots_[i].load(std::memory_order_relaxed).fn; }
  void store(DeviceType device, DType dtype, MemoryFormat format, ErasedFn fn);
  // The miss path of get(): registers, reads again, and throws the DTypeError if still empty.
  ErasedFn get_slow(const char* op, Device device, DType dtype, MemoryFormat format) const;

 private:
  std::array<std::atomic<Slot>, kSlots> slots_{};
};

// Fn is the kernel's function type, e.g.
//   using MaxPool2dForwardKernel = void(const Context&, const Pool2dShape&, DType, const void*, void*, std::int64_t*);
template <class Fn>
class KernelTable : public KernelTableBase {
 public:
  constexpr KernelTable() = default;

  // Registration: one kernel per (device type, dtype, memory format); a later set replaces.
  void set(DeviceType device, DType dtype, MemoryFormat format, Fn* kernel) {
    store(device, dtype, format, reinterpret_cast<ErasedFn>(kernel));
  }
  void set(DeviceType device, DType dtype, Fn* kernel) { set(device, dtype, MemoryFormat::Contiguous, kernel); }

  // The kernel for a call, or DTypeError naming `op`, the dtype, layout and device.
  Fn* get(const char* op, Device device, DType dtype, MemoryFormat format = MemoryFormat::Contiguous) const {
    const ErasedFn fn = load(index(device.type, dtype, format));
    if (fn != nullptr) [[likely]] return reinterpret_cast<Fn*>(fn);
    return reinterpret_cast<Fn*>(get_slow(op, device, dtype, format));
  }

  // The kernel or nullptr, without throwing (e.g. "is there a fused kernel for this device?").
  Fn* find(DeviceType device, DType dtype, MemoryFormat format = MemoryFormat::Contiguous) const {
    return has(device, dtype, format) ? reinterpret_cast<Fn*>(load(index(device, dtype, format))) : nullptr;
  }
};

}  // namespace sublet::ops
