// linear: the matmul with the transposed weight (a view: cuBLAS reads it transposed in place)
// and a broadcast bias add, each its own node.
#include "runtime/autocast.h"
#include "runtime/nn/functional.h"
#include "runtime/nn/functional_checks.h"

namespace sublet::nn::functional {

Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias) {
  const char* op = "linear";
  sublet::detail::check_defined(op, input);
  sublet::detail::check_defined(op, weight);
  nn::detail::check_rank(op, "weight", weight, 2, "(out_features, in_features)");
  if (input.dim() < 1 || input.size(-1) != weight.size(1)) {
    throw ShapeError("linear: input of shape " + shape_str(input.sizes()) + " does not end in in_features = " +
                     std::to_string(weight.size(1)) + " (weight " + shape_str(weight.sizes()) + ")");
  }
  if (bias.defined() && (bias.dim() != 1 || bias.size(0) != weight.size(0))) {
    throw ShapeError("linear: bias must be [" + std::to_string(weight.size(0)) + "], got " + shape_str(bias.sizes()));
  }
  // Under autocast the leaf weight is cast before the transpose (a view would miss the cast
  // cache), and the bias with it, so the output stays in the 16-bit type as torch's F.linear.
  Tensor out = input.matmul(amp::to_lower(weight).t());
  return bias.defined() ? out + amp::to_lower(bias) : out;
}

}  // namespace sublet::nn::functional
