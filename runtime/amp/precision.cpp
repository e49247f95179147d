#include "runtime/amp/precision.h"

#include "core/errors.h"

namespace sublet::amp {

const char* precision_name(Precision precision) {
  switch (precision) {
    case Precision::Fp32: return "fp32";
    case Precision::Bf16: return "bf16";
    case Precision::Fp16: return "fp16";
  }
  return "?";
}

Precision parse_precision(const std::string& text, const std::string& flag) {
  if (text == "fp32" || text == "float32") return Precision::Fp32;
  if (text == "bf16" || text == "bfloat16") return Precision::Bf16;
  if (text == "fp16" || text == "float16") return Precision::Fp16;
  throw ValueError(flag + " '" + text + "': expected fp32, bf16 or fp16");
}

std::optional<DType> autocast_dtype_of(Precision precision) {
  switch (precision) {
    case Precision::Fp32: return std::nullopt;
    case Precision::Bf16: return DType::BFloat16;
    case Precision::Fp16: return DType::Float16;
  }
  return std::nullopt;
}

}  // namespace sublet::amp
