#include "train/tensor_records.h"

#include <cstring>

#include "core/errors.h"

namespace sublet::train {
namespace {

const char* record_dtype(DType dtype) {
  switch (dtype) {
    case DType::Float32: return "F32";
    case DType::Float64: return "F64";
    case DType::Int64: return "I64";
    default: break;
  }
  throw DTypeError(std::string("to_record: expected float32, float64 or int64, got ") + dtype_name(dtype));
}

}  // namespace

io::TensorRecord to_record(const Tensor& tensor) {
  const Tensor host = tensor.detach().to(Device::cpu()).contiguous();
  io::TensorRecord record;
  record.dtype = record_dtype(host.dtype());
  record.shape.assign(host.sizes().begin(), host.sizes().end());
  record.bytes.resize(host.nbytes());
  // Little-endian host (x86-64, aarch64): the in-memory bytes are the file's bytes.
  if (!record.bytes.empty()) std::memcpy(record.bytes.data(), host.data_ptr(), record.bytes.size());
  return record;
}

Tensor from_record(const io::TensorRecord& record, const std::string& name) {
  DType dtype;
  if (record.dtype == "F32") {
    dtype = DType::Float32;
  } else if (record.dtype == "F64") {
    dtype = DType::Float64;
  } else if (record.dtype == "I64") {
    dtype = DType::Int64;
  } else {
    throw IoError("checkpoint entry '" + name + "' has dtype " + record.dtype + "; expected F32, F64 or I64");
  }
  const Shape shape(record.shape.begin(), record.shape.end());
  Tensor out = Tensor::empty(shape, TensorOptions().dtype(dtype));
  if (out.nbytes() != record.bytes.size()) {
    throw IoError("checkpoint entry '" + name + "' holds " + std::to_string(record.bytes.size()) +
                  " bytes, its shape needs " + std::to_string(out.nbytes()));
  }
  if (!record.bytes.empty()) std::memcpy(out.data_ptr(), record.bytes.data(), record.bytes.size());
  return out;
}

}  // namespace sublet::train
