#pragma once
// Tensors to and from safetensors records (io::TensorRecord is independent of Tensor so that
// runtime/io stays free of it): the bridge checkpoints need.
#include <string>

#include "runtime/io/safetensors.h"
#include "runtime/tensor.h"

namespace sublet::train {

// Copies `tensor` (any device, any layout; float32, float64 or int64) into a record: F32, F64, I64.
io::TensorRecord to_record(const Tensor& tensor);

// A CPU tensor with the record's values. Throws IoError naming `name` for a dtype sublet does
// not have (a checkpoint from another tool).
Tensor from_record(const io::TensorRecord& record, const std::string& name);

}  // namespace sublet::train
