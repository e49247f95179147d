#pragma once
// The DLPack 1.x exchange structs, declared here to the published ABI (dmlc/dlpack
// include/dlpack/dlpack.h, v1.1) because Debian 12 ships DLPack 0.6 only (no
// DLManagedTensorVersioned, no read-only flag). Only the layout matters across the boundary: the
// names are those of dlpack.h, inside namespace sublet::dlpack so that a translation unit may
// include the real dlpack.h (PyTorch's ATen/dlpack.h, say) as well. The flag macros of dlpack.h
// are constants here (kFlagBitmask...), so that an included dlpack.h cannot expand into them.
// The static_asserts at the end pin the x86-64/aarch64 layout.
#include <cstddef>
#include <cstdint>

namespace sublet::dlpack {

// The version sublet produces; a consumer accepts any minor version of the same major.
inline constexpr std::uint32_t kMajorVersion = 1;  // DLPACK_MAJOR_VERSION
inline constexpr std::uint32_t kMinorVersion = 1;  // DLPACK_MINOR_VERSION

// DLPACK_FLAG_BITMASK_READ_ONLY: the consumer must not write through the tensor.
inline constexpr std::uint64_t kFlagBitmaskReadOnly = std::uint64_t{1} << 0;
// DLPACK_FLAG_BITMASK_IS_COPIED: the producer made a copy for this exchange (nobody else sees it).
inline constexpr std::uint64_t kFlagBitmaskIsCopied = std::uint64_t{1} << 1;
// DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (1.1): sub-byte elements padded to a byte each.
inline constexpr std::uint64_t kFlagBitmaskIsSubbyteTypePadded = std::uint64_t{1} << 2;

struct DLPackVersion {
  std::uint32_t major;
  std::uint32_t minor;
};

// DLDeviceType: an int32 enum in the ABI.
enum DLDeviceType : std::int32_t {
  kDLCPU = 1,
  kDLCUDA = 2,
  kDLCUDAHost = 3,  // pinned host memory (cudaMallocHost)
  kDLOpenCL = 4,
  kDLVulkan = 7,
  kDLMetal = 8,
  kDLVPI = 9,
  kDLROCM = 10,
  kDLROCMHost = 11,
  kDLExtDev = 12,
  kDLCUDAManaged = 13,
  kDLOneAPI = 14,
  kDLWebGPU = 15,
  kDLHexagon = 16,
  kDLMAIA = 17,
};

struct DLDevice {
  DLDeviceType device_type;
  std::int32_t device_id;
};

// DLDataTypeCode: stored in the uint8 `code` of DLDataType.
enum DLDataTypeCode : std::uint8_t {
  kDLInt = 0,
  kDLUInt = 1,
  kDLFloat = 2,
  kDLOpaqueHandle = 3,
  kDLBfloat = 4,
  kDLComplex = 5,
  kDLBool = 6,
  kDLFloat8_e3m4 = 7,
  kDLFloat8_e4m3 = 8,
  kDLFloat8_e4m3b11fnuz = 9,
  kDLFloat8_e4m3fn = 10,
  kDLFloat8_e4m3fnuz = 11,
  kDLFloat8_e5m2 = 12,
  kDLFloat8_e5m2fnuz = 13,
  kDLFloat8_e8m0fnu = 14,
  kDLFloat6_e2m3fn = 15,
  kDLFloat6_e3m2fn = 16,
  kDLFloat4_e2m1fn = 17,
};

struct DLDataType {
  std::uint8_t code;   // a DLDataTypeCode
  std::uint8_t bits;
  std::uint16_t lanes;
};

struct DLTensor {
  void* data;  // the allocation's start; the first element is at data + byte_offset
  DLDevice device;
  std::int32_t ndim;
  DLDataType dtype;
  std::int64_t* shape;
  std::int64_t* strides;  // in elements; null: compact row-major
  std::uint64_t byte_offset;
};

// DLPack before 1.0 (and PyTorch 1.13's at::toDLPack/fromDLPack): no version, no flags.
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};

// DLPack 1.x. `version`, `manager_ctx` and `deleter` stay where they are in every future ABI, so a
// consumer that refuses another major version can still call the deleter.
struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(DLManagedTensorVersioned* self);
  std::uint64_t flags;
  DLTensor dl_tensor;
};

static_assert(sizeof(DLDevice) == 8 && sizeof(DLDataType) == 4, "DLPack ABI: DLDevice and DLDataType");
static_assert(sizeof(DLTensor) == 48 && offsetof(DLTensor, device) == 8 && offsetof(DLTensor, ndim) == 16 &&
                  offsetof(DLTensor, dtype) == 20 && offsetof(DLTensor, shape) == 24 &&
                  offsetof(DLTensor, strides) == 32 && offsetof(DLTensor, byte_offset) == 40,
              "DLPack ABI: DLTensor");
static_assert(sizeof(DLManagedTensor) == 64 && offsetof(DLManagedTensor, manager_ctx) == 48 &&
                  offsetof(DLManagedTensor, deleter) == 56,
              "DLPack ABI: DLManagedTensor");
static_assert(sizeof(DLManagedTensorVersioned) == 80 && offsetof(DLManagedTensorVersioned, manager_ctx) == 8 &&
                  offsetof(DLManagedTensorVersioned, deleter) == 16 && offsetof(DLManagedTensorVersioned, flags) == 24 &&
                  offsetof(DLManagedTensorVersioned, dl_tensor) == 32,
              "DLPack ABI: DLManagedTensorVersioned");

}  // namespace sublet::dlpack
