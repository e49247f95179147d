#pragma once
// A residual add and the layer norm of its result as one op, as apex's FusedAddLayerNorm (the
// pre-norm transformer block's x + attn(...) followed by ln_2):
//
//   auto [h, normed] = F::add_layer_norm(x, attn_out, {C}, ln_2->weight, ln_2->bias);
//   // h == x + attn_out, normed == F::layer_norm(h, {C}, ln_2->weight, ln_2->bias)
//
// Values and gradients are those of the two ops (the same bits). On CUDA it is one kernel each
// way where the dtypes allow (residual, weight and bias of one dtype, branch of the output's
// dtype: all float32, all float64, all 16-bit without autocast, or a float32 residual with a
// bfloat16/float16 branch and output); backward adds the sum's own gradient into the norm's
// input gradient in the same kernel. Elsewhere, and on the CPU, it runs the two ops.
#include <cstdint>
#include <optional>
#include <vector>

#include "runtime/tensor.h"

namespace sublet::nn::functional {

struct AddLayerNorm {
  Tensor sum;         // residual + branch (the residual stream)
  Tensor normalized;  // layer_norm(sum), in output_dtype when given
};

// residual and branch of one shape (no broadcasting in the fused path; the unfused one
// broadcasts as `+` does). output_dtype as functional::layer_norm's.
AddLayerNorm add_layer_norm(const Tensor& residual, const Tensor& branch, std::vector<std::int64_t> normalized_shape,
                            const Tensor& weight = {}, const Tensor& bias = {}, double eps = 1e-5,
                            std::optional<DType> output_dtype = std::nullopt);

}  // namespace sublet::nn::functional
