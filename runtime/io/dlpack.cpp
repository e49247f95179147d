#include "runtime/io/dlpack.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/errors.h"
#include "memory/registry.h"
#include "runtime/shape.h"

namespace sublet {
namespace {

using dlpack::DLDataType;
using dlpack::DLDevice;
using dlpack::DLManagedTensor;
using dlpack::DLManagedTensorVersioned;
using dlpack::DLTensor;

constexpr const char* kTakes = "sublet takes float32, float64, int64, uint8, bfloat16 and float16";

// ---- export ----

DLDataType dl_dtype(DType dtype) {
  const auto bits = static_cast<std::uint8_t>(element_size(dtype) * 8);
  switch (dtype) {
    case DType::Float32:
    case DType::Float64:
    case DType::Float16: return {dlpack::kDLFloat, bits, 1};
    case DType::Int64: return {dlpack::kDLInt, bits, 1};
    case DType::UInt8: return {dlpack::kDLUInt, bits, 1};
    case DType::BFloat16: return {dlpack::kDLBfloat, bits, 1};
  }
  throw DTypeError(std::string("to_dlpack: no DLPack type for dtype ") + dtype_name(dtype));
}

DLDevice dl_device(const Tensor& tensor) {
  const Device device = tensor.device();
  if (device.is_cuda()) return {dlpack::kDLCUDA, device.index};
  return {tensor.storage().pinned_host() ? dlpack::kDLCUDAHost : dlpack::kDLCPU, 0};
}

// What the managed tensor's manager_ctx points to: the tensor (its storage stays allocated while
// this lives) and the shape and strides the DLTensor points into.
template <typename Managed>
struct Exported {
  Tensor tensor;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;
  Managed managed{};
};

template <typename Managed>
void delete_exported(Managed* self) noexcept {
  if (self) delete static_cast<Exported<Managed>*>(self->manager_ctx);
}

template <typename Managed>
Managed* export_tensor(const Tensor& tensor, const char* op) {
  if (!tensor.defined()) throw ValueError(std::string(op) + ": expected a defined tensor, got an undefined one");
  if (tensor.requires_grad()) {
    throw ValueError(std::string(op) + ": expected a tensor that does not require grad, got " + tensor.to_string() +
                     " (DLPack carries no autograd history; export tensor.detach())");
  }
  auto* exported = new Exported<Managed>{tensor, {}, {}, {}};
  try {
    exported->shape.assign(tensor.sizes().begin(), tensor.sizes().end());
    exported->strides.assign(tensor.strides().begin(), tensor.strides().end());
    DLTensor& dl = exported->managed.dl_tensor;
    dl.data = tensor.data_ptr();  // the first element: the view's offset is already in it
    dl.device = dl_device(tensor);
    dl.ndim = static_cast<std::int32_t>(tensor.dim());
    dl.dtype = dl_dtype(tensor.dtype());
    dl.shape = exported->shape.data();
    dl.strides = exported->strides.data();
    dl.byte_offset = 0;
  } catch (...) {
    delete exported;
    throw;
  }
  exported->managed.manager_ctx = exported;
  exported->managed.deleter = &delete_exported<Managed>;
  return &exported->managed;
}

// ---- import ----

std::string device_type_name(std::int32_t type) {
  switch (type) {
    case dlpack::kDLCPU: return "kDLCPU";
    case dlpack::kDLCUDA: return "kDLCUDA";
    case dlpack::kDLCUDAHost: return "kDLCUDAHost";
    case dlpack::kDLOpenCL: return "kDLOpenCL";
    case dlpack::kDLVulkan: return "kDLVulkan";
    case dlpack::kDLMetal: return "kDLMetal";
    case dlpack::kDLVPI: return "kDLVPI";
    case dlpack::kDLROCM: return "kDLROCM";
    case dlpack::kDLROCMHost: return "kDLROCMHost";
    case dlpack::kDLExtDev: return "kDLExtDev";
    case dlpack::kDLCUDAManaged: return "kDLCUDAManaged";
    case dlpack::kDLOneAPI: return "kDLOneAPI";
    case dlpack::kDLWebGPU: return "kDLWebGPU";
    case dlpack::kDLHexagon: return "kDLHexagon";
    case dlpack::kDLMAIA: return "kDLMAIA";
    default: return "device type";
  }
}

DType sublet_dtype(DLDataType dtype) {
  if (dtype.lanes == 1) {
    const int bits = dtype.bits;
    switch (dtype.code) {
      case dlpack::kDLFloat:
        if (bits == 32) return DType::Float32;
        if (bits == 64) return DType::Float64;
        if (bits == 16) return DType::Float16;
        break;
      case dlpack::kDLInt:
        if (bits == 64) return DType::Int64;
        break;
      case dlpack::kDLUInt:
        if (bits == 8) return DType::UInt8;
        break;
      case dlpack::kDLBfloat:
        if (bits == 16) return DType::BFloat16;
        break;
      default: break;
    }
  }
  throw DTypeError("from_dlpack: unsupported dtype " + dlpack_dtype_name(dtype) + " (DLPack code " +
                   std::to_string(dtype.code) + ", " + std::to_string(dtype.bits) + " bits, " +
                   std::to_string(dtype.lanes) + " lanes); " + kTakes + " with 1 lane");
}

struct ImportedDevice {
  Device device;
  bool pinned_host = false;
};

ImportedDevice sublet_device(DLDevice device) {
  switch (device.device_type) {
    case dlpack::kDLCPU: return {Device::cpu(), false};
    case dlpack::kDLCUDAHost: return {Device::cpu(), true};
    case dlpack::kDLCUDA: {
      const int count = memory::cuda_device_count();
      if (device.device_id < 0 || device.device_id >= count) {
        throw DeviceError("from_dlpack: the tensor is on kDLCUDA device " + std::to_string(device.device_id) +
                          ", but sublet sees " + std::to_string(count) + " CUDA device(s)" +
                          (memory::cuda_built() ? "" : " (built without CUDA)"));
      }
      return {Device::cuda(device.device_id), false};
    }
    default: break;
  }
  throw DeviceError("from_dlpack: unsupported device " + device_type_name(device.device_type) + " (" +
                    std::to_string(device.device_type) + "); sublet takes kDLCPU (1), kDLCUDA (2) and kDLCUDAHost (3)");
}

// What sublet makes of a DLTensor, checked before anything is built.
struct Layout {
  DType dtype;
  ImportedDevice device;
  Shape sizes;
  Shape strides;
  void* first = nullptr;   // data + byte_offset
  std::size_t nbytes = 0;  // from the first element to the end of the last one
};

Layout read_layout(const DLTensor& dl) {
  Layout layout;
  layout.dtype = sublet_dtype(dl.dtype);
  layout.device = sublet_device(dl.device);
  if (dl.ndim < 0) throw ShapeError("from_dlpack: expected ndim >= 0, found " + std::to_string(dl.ndim));
  if (dl.ndim > 0 && dl.shape == nullptr) {
    throw ShapeError("from_dlpack: expected a shape array for ndim " + std::to_string(dl.ndim) + ", found null");
  }
  layout.sizes.assign(dl.shape, dl.shape + dl.ndim);
  for (std::int64_t size : layout.sizes) {
    if (size < 0) throw ShapeError("from_dlpack: expected non-negative sizes, found " + shape_str(layout.sizes));
  }
  if (dl.strides != nullptr) {
    layout.strides.assign(dl.strides, dl.strides + dl.ndim);
  } else {  // compact row-major
    layout.strides.assign(static_cast<std::size_t>(dl.ndim), 0);
    std::int64_t stride = 1;
    for (std::int32_t d = dl.ndim - 1; d >= 0; --d) {
      layout.strides[d] = stride;
      stride *= std::max<std::int64_t>(layout.sizes[d], 1);
    }
  }
  // The extent the view reaches; a dimension of size 1 (or 0) never moves, whatever its stride.
  std::int64_t numel = 1;
  std::int64_t last = 0;
  for (std::int32_t d = 0; d < dl.ndim; ++d) {
    numel *= layout.sizes[d];
    if (layout.sizes[d] <= 1) {
      if (layout.strides[d] < 0) layout.strides[d] = 0;
      continue;
    }
    if (layout.strides[d] < 0) {
      throw ShapeError("from_dlpack: expected non-negative strides (sublet views do not step backwards), found " +
                       shape_str(layout.strides) + " for sizes " + shape_str(layout.sizes));
    }
    std::int64_t reach;
    if (__builtin_mul_overflow(layout.sizes[d] - 1, layout.strides[d], &reach) ||
        __builtin_add_overflow(last, reach, &last)) {
      throw ShapeError("from_dlpack: sizes " + shape_str(layout.sizes) + " with strides " +
                       shape_str(layout.strides) + " overflow a 64-bit element offset");
    }
  }
  if (numel > 0) layout.nbytes = static_cast<std::size_t>(last + 1) * element_size(layout.dtype);
  if (dl.data == nullptr && numel > 0) {
    throw ValueError("from_dlpack: expected a data pointer for " + std::to_string(numel) + " elements, found null");
  }
  layout.first = dl.data == nullptr ? nullptr : static_cast<char*>(dl.data) + dl.byte_offset;
  return layout;
}

template <typename Managed>
void run_deleter(void* managed) noexcept {
  auto* m = static_cast<Managed*>(managed);
  if (m->deleter) m->deleter(m);
}

template <typename Managed>
Tensor import_tensor(Managed* managed, std::uint64_t flags) {
  // A tensor sublet exported comes back as itself (its storage, category and flags).
  if (managed->deleter == &delete_exported<Managed>) {
    Tensor tensor = static_cast<Exported<Managed>*>(managed->manager_ctx)->tensor;
    managed->deleter(managed);
    return tensor;
  }
  Layout layout;
  try {
    layout = read_layout(managed->dl_tensor);
  } catch (...) {
    run_deleter<Managed>(managed);  // taken over in every case (see dlpack.h)
    throw;
  }
  ExternalMemory external;
  external.data = layout.first;
  external.release = &run_deleter<Managed>;
  external.context = managed;
  external.read_only = (flags & dlpack::kFlagBitmaskReadOnly) != 0;
  external.pinned_host = layout.device.pinned_host;
  Storage storage = Storage::wrap_external(external, layout.nbytes, layout.device.device);
  return Tensor(TensorImplPtr::adopt(
      new TensorImpl(std::move(storage), std::move(layout.sizes), std::move(layout.strides), layout.dtype)));
}

}  // namespace

std::string dlpack_dtype_name(DLDataType dtype) {
  const char* kind = nullptr;
  switch (dtype.code) {
    case dlpack::kDLInt: kind = "int"; break;
    case dlpack::kDLUInt: kind = "uint"; break;
    case dlpack::kDLFloat: kind = "float"; break;
    case dlpack::kDLOpaqueHandle: kind = "opaque_handle"; break;
    case dlpack::kDLBfloat: kind = "bfloat"; break;
    case dlpack::kDLComplex: kind = "complex"; break;
    case dlpack::kDLBool: kind = "bool"; break;
    default: break;
  }
  std::string name;
  if (kind != nullptr) {
    name.append(kind).append(std::to_string(dtype.bits));
  } else {  // the float8/6/4 codes of DLPack 1.1, or a code this header does not know
    name.append("type code ").append(std::to_string(dtype.code)).append(" of ").append(std::to_string(dtype.bits));
    name.append(" bits");
  }
  if (dtype.lanes != 1) name.append("x").append(std::to_string(dtype.lanes));
  return name;
}

dlpack::DLManagedTensorVersioned* to_dlpack(const Tensor& tensor) {
  DLManagedTensorVersioned* managed = export_tensor<DLManagedTensorVersioned>(tensor, "to_dlpack");
  managed->version = {dlpack::kMajorVersion, dlpack::kMinorVersion};
  managed->flags = tensor.storage().read_only() ? dlpack::kFlagBitmaskReadOnly : 0;
  return managed;
}

dlpack::DLManagedTensor* to_dlpack_legacy(const Tensor& tensor) {
  if (tensor.defined() && tensor.storage().read_only()) {
    throw ValueError("to_dlpack_legacy: expected a writable tensor, found a read-only one; the legacy "
                     "DLManagedTensor cannot say read-only (use to_dlpack, or export a clone())");
  }
  return export_tensor<DLManagedTensor>(tensor, "to_dlpack_legacy");
}

Tensor from_dlpack(dlpack::DLManagedTensorVersioned* managed) {
  if (managed == nullptr) throw ValueError("from_dlpack: expected a DLManagedTensorVersioned*, got a null pointer");
  // version, manager_ctx and deleter keep their places in every DLPack ABI: the deleter is safe to
  // call even when the rest of the struct has another layout.
  if (managed->version.major != dlpack::kMajorVersion) {
    const std::string found = std::to_string(managed->version.major) + "." + std::to_string(managed->version.minor);
    run_deleter<DLManagedTensorVersioned>(managed);
    throw ValueError("from_dlpack: expected DLPack major version " + std::to_string(dlpack::kMajorVersion) +
                     " (1.x), found " + found + "; the producer speaks an ABI sublet does not know");
  }
  return import_tensor(managed, managed->flags);
}

Tensor from_dlpack(dlpack::DLManagedTensor* managed) {
  if (managed == nullptr) throw ValueError("from_dlpack: expected a DLManagedTensor*, got a null pointer");
  return import_tensor(managed, 0);
}

}  // namespace sublet
