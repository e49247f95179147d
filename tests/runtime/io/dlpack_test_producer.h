#pragma once
// A DLPack producer that is not sublet, for the DLPack tests: it describes memory the test owns
// (a host buffer, or a tensor the test keeps alive) as a DLManagedTensorVersioned or a legacy
// DLManagedTensor, and its deleter only counts its calls. from_dlpack cannot recognise it as one of
// sublet's own exports, so the import really goes through external storage.
#include <cstdint>
#include <vector>

#include "runtime/io/dlpack_abi.h"

namespace sublet::testing {

struct DLPackProducer {
  int deleter_calls = 0;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;  // empty: the DLTensor's strides are null (row-major)
  dlpack::DLManagedTensorVersioned versioned{};
  dlpack::DLManagedTensor legacy{};

  dlpack::DLTensor describe(void* data, dlpack::DLDevice device, dlpack::DLDataType dtype, std::uint64_t byte_offset) {
    dlpack::DLTensor dl{};
    dl.data = data;
    dl.device = device;
    dl.ndim = static_cast<std::int32_t>(shape.size());
    dl.dtype = dtype;
    dl.shape = shape.data();
    dl.strides = strides.empty() ? nullptr : strides.data();
    dl.byte_offset = byte_offset;
    return dl;
  }

  dlpack::DLManagedTensorVersioned* make_versioned(void* data, dlpack::DLDevice device, dlpack::DLDataType dtype,
                                                   std::uint64_t flags = 0, std::uint64_t byte_offset = 0) {
    versioned.version = {dlpack::kMajorVersion, 0};
    versioned.manager_ctx = this;
    versioned.deleter = [](dlpack::DLManagedTensorVersioned* self) {
      ++static_cast<DLPackProducer*>(self->manager_ctx)->deleter_calls;
    };
    versioned.flags = flags;
    versioned.dl_tensor = describe(data, device, dtype, byte_offset);
    return &versioned;
  }

  dlpack::DLManagedTensor* make_legacy(void* data, dlpack::DLDevice device, dlpack::DLDataType dtype) {
    legacy.manager_ctx = this;
    legacy.deleter = [](dlpack::DLManagedTensor* self) {
      ++static_cast<DLPackProducer*>(self->manager_ctx)->deleter_calls;
    };
    legacy.dl_tensor = describe(data, device, dtype, 0);
    return &legacy;
  }
};

inline constexpr dlpack::DLDevice kDLCpu{dlpack::kDLCPU, 0};
inline constexpr dlpack::DLDataType kDLFloat32{dlpack::kDLFloat, 32, 1};

}  // namespace sublet::testing
