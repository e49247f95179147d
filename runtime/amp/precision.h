#pragma once
// The training precisions the CLI and the step recipes speak of (`--precision fp32|bf16|fp16`):
// fp32 runs everything in float32; bf16 and fp16 run under autocast (runtime/autocast.h) in
// that 16-bit type, with float32 master weights; fp16 also scales the loss (amp::GradScaler),
// as PyTorch's recipes do (bf16 has float32's range and needs no scaling).
#include <optional>
#include <string>

#include "core/dtype.h"

namespace sublet::amp {

enum class Precision { Fp32, Bf16, Fp16 };

// "fp32", "bf16", "fp16".
const char* precision_name(Precision precision);
// The names above (and "float32", "bfloat16", "float16"); ValueError naming `flag`, the text
// and the allowed values otherwise.
Precision parse_precision(const std::string& text, const std::string& flag = "--precision");
// The autocast dtype: none for fp32.
std::optional<DType> autocast_dtype_of(Precision precision);
// Whether the recipe scales the loss (fp16 only).
inline bool needs_loss_scaling(Precision precision) { return precision == Precision::Fp16; }

}  // namespace sublet::amp
